"""Reading ELF: the header, the loader's view and the section tables, symbols, relocations, load order."""
