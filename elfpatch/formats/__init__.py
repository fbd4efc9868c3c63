"""Container formats: ar archives, zip and wheels, and splicing their bytes."""
