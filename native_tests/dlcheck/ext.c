/* libext.so: an extension that needs libbundled.so from its own wheel's directory (DT_RUNPATH
   $ORIGIN/ext.libs), outside the system's library directories. It unloads; libbundled.so stays. */
int bundled_value(void);

int ext_value(void) { return bundled_value() + 1; }
