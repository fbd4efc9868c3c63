"""The command-line layer: each subcommand, its options, and what it draws on the terminal."""
