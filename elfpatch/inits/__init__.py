"""Static initialization: `order` lists initializers and finalizers in the loader's order (`elfpatch inits`);
the rest is the analysis from the disassembled binary (`inits --dtors/--siof`), whose rule is `siof`. Only
those flags import the disassembler (capstone), which `elfpatch unique` never loads."""
