"""The file system: sources, locks, temps, the atomic commit, the relink of hard links and its journal."""
