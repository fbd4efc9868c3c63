"""The subcommands: each registers its own parser and runs; what their options share."""
