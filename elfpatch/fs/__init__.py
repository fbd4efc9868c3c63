"""The file system: opening inputs, locks, the SIGBUS guard, the one commit protocol."""
