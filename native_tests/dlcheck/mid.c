/* libmid.so: defines hook() and calls it. libtop.so, which needs libmid.so, defines hook() too, so in
   libtop's dlopen the loader binds libmid's call to libtop's hook (libtop comes first in the scope of every
   object that dlopen brought in). A normal symbol found in scope: never a cross binding. */
int hook(void) { return 1; }
int mid_call(void) { return hook(); }
