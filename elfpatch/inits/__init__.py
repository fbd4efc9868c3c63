"""Static-initialization analysis from the disassembled binary (`inits --dtors/--siof`).

Only these flags import this package: it needs capstone, which `elfpatch unique` never loads."""
