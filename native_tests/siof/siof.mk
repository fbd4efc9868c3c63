# The order fixtures (x86-64, g++): each program plain (-O2 and -O0, for elfpatch) and with ASan's
# init-order checker (the run-time truth), same sources, same link order. NAME := units in link order.
SIOF_PROGS := cross_ab cross_ba third overwrite safe nodestructor thread_local inline prio ctorn registrar indirect vector \
              loop_ctor loop_store loop_callee placement shared_init switch
cross_ab := cfg user
cross_ba := user cfg
third := third_user cfg third_helper
overwrite := limit_user limit
safe := safe_user safe_def cfg
nodestructor := nd_user nd_def cfg
thread_local := tl_user tl_def cfg
inline := inl_a inl_b cfg
prio := prio_user prio_def cfg
ctorn := ctorn cfg
registrar := reg_plugin reg_map
indirect := vcall vcall_impl
vector := vec_user vec_table vec_helper
loop_ctor := loop_user loop_slots loop_slot
loop_store := loop_sq_user loop_squares
loop_callee := loop_lut_user loop_lut
placement := place_user place_box place_ctor
shared_init := shared_a shared_b shared_defaults
switch := sw_user cfg
SB := $(B)/siof
ASAN := -fsanitize=address -fsanitize-recover=address
SIOF_HDRS := cfg.hpp inl.hpp vec.hpp loop.hpp place.hpp

# Also clang -O2 (with its own ASan build, clang-asan) and, for elfpatch only, AArch64 -O2/-O0, where those
# compilers are present.
SIOF_MORE := $(if $(call HAVE,clang++),clang-O2) $(if $(call HAVE,aarch64-linux-gnu-g++),a64-O2 a64-O0)
ifneq ($(call HAVE,g++),)
siof: $(foreach p,$(SIOF_PROGS),$(SB)/O2/$(p) $(SB)/O0/$(p) $(SB)/asan/$(p)) $(SB)/O2/libgot.so $(SB)/O0/libgot.so $(SB)/O2/got \
      $(SB)/asan/libgot.so $(SB)/asan/got $(SB)/lto/cross_ba \
      $(foreach v,$(SIOF_MORE),$(foreach p,$(SIOF_PROGS),$(SB)/$(v)/$(p)) $(SB)/$(v)/libgot.so) \
      $(foreach v,$(filter a64-%,$(SIOF_MORE)),$(SB)/$(v)/probe_xword) \
      $(if $(call HAVE,clang++),$(foreach p,$(SIOF_PROGS) got,$(SB)/clang-asan/$(p)) $(SB)/clang-asan/libgot.so)
else
siof:
	@echo "siof: skipped (no g++)"
endif

$(SB)/%/.dir:
	mkdir -p $(@D) && touch $@
$(SB)/O2/%.o: %.cpp $(SIOF_HDRS) $(SB)/O2/.dir
	g++ -std=c++20 -O2 -g -c -o $@ $<
$(SB)/O0/%.o: %.cpp $(SIOF_HDRS) $(SB)/O0/.dir
	g++ -std=c++20 -O0 -g -c -o $@ $<
$(SB)/asan/%.o: %.cpp $(SIOF_HDRS) $(SB)/asan/.dir
	g++ -std=c++20 -O1 -g $(ASAN) -c -o $@ $<
$(SB)/O2/pic_%.o: %.cpp $(SIOF_HDRS) $(SB)/O2/.dir
	g++ -std=c++20 -O2 -g -fPIC -c -o $@ $<
$(SB)/O0/pic_%.o: %.cpp $(SIOF_HDRS) $(SB)/O0/.dir
	g++ -std=c++20 -O0 -g -fPIC -c -o $@ $<
$(SB)/asan/pic_%.o: %.cpp $(SIOF_HDRS) $(SB)/asan/.dir
	g++ -std=c++20 -O1 -g -fPIC $(ASAN) -c -o $@ $<

define siof_prog
$(SB)/O2/$(1): $(foreach u,$($(1)) siof_main,$(SB)/O2/$(u).o)
	g++ -pie -o $$@ $$^
$(SB)/O0/$(1): $(foreach u,$($(1)) siof_main,$(SB)/O0/$(u).o)
	g++ -pie -o $$@ $$^
$(SB)/asan/$(1): $(foreach u,$($(1)) siof_main,$(SB)/asan/$(u).o)
	g++ $(ASAN) -pie -o $$@ $$^
endef
$(foreach p,$(SIOF_PROGS),$(eval $(call siof_prog,$(p))))

define siof_more
$(SB)/$(1)/%.o: %.cpp $(SIOF_HDRS) $(SB)/$(1)/.dir
	$(2) -std=c++20 $(3) -g -c -o $$@ $$<
$(SB)/$(1)/pic_%.o: %.cpp $(SIOF_HDRS) $(SB)/$(1)/.dir
	$(2) -std=c++20 $(3) -g -fPIC -c -o $$@ $$<
$(SB)/$(1)/libgot.so: $(SB)/$(1)/pic_user.o $(SB)/$(1)/pic_cfg.o
	$(2) -shared -o $$@ $$^
$(foreach p,$(SIOF_PROGS),$(eval $(call siof_more_prog,$(1),$(2),$(p))))
endef
define siof_more_prog
$(SB)/$(1)/$(3): $(foreach u,$($(3)) siof_main,$(SB)/$(1)/$(u).o)
	$(2) -pie -o $$@ $$^
endef
$(eval $(call siof_more,clang-O2,clang++,-O2))
$(eval $(call siof_more,clang-asan,clang++ $(ASAN),-O1))
$(SB)/clang-asan/got: $(SB)/clang-asan/siof_main.o $(SB)/clang-asan/libgot.so
	clang++ $(ASAN) -o $@ $< -L$(SB)/clang-asan -lgot -Wl,-rpath,'$$ORIGIN'

$(eval $(call siof_more,a64-O2,aarch64-linux-gnu-g++,-O2))
$(eval $(call siof_more,a64-O0,aarch64-linux-gnu-g++,-O0))
# probe_xword on AArch64 (the library loads the program's pointer words with ldr): its test runs it under qemu.
define a64_xword
$(SB)/$(1)/libprobe_xword.so: $(SB)/$(1)/pic_probe_xword_lib.o $(SB)/$(1)/pic_probe_box.o
	aarch64-linux-gnu-g++ -shared -o $$@ $$^
$(SB)/$(1)/probe_xword: $(SB)/$(1)/probe_xword_main.o $(SB)/$(1)/libprobe_xword.so
	aarch64-linux-gnu-g++ -pie -o $$@ $$< -L$(SB)/$(1) -lprobe_xword -Wl,-rpath,'$$$$ORIGIN'
endef
$(eval $(call a64_xword,a64-O2))
$(eval $(call a64_xword,a64-O0))

# Link-time optimization merges every unit's initializer into one function: order between them is not seen.
$(SB)/lto/%.o: %.cpp $(SIOF_HDRS) $(SB)/lto/.dir
	g++ -std=c++20 -O2 -flto -c -o $@ $<
$(SB)/lto/cross_ba: $(SB)/lto/user.o $(SB)/lto/cfg.o $(SB)/lto/siof_main.o
	g++ -O2 -flto -pie -o $@ $^

# A -fPIC library whose initializer reads an exported global through the GOT (user.cpp linked first).
$(SB)/O2/libgot.so: $(SB)/O2/pic_user.o $(SB)/O2/pic_cfg.o
	g++ -shared -o $@ $^
$(SB)/O0/libgot.so: $(SB)/O0/pic_user.o $(SB)/O0/pic_cfg.o
	g++ -shared -o $@ $^
$(SB)/O2/got: $(SB)/O2/siof_main.o $(SB)/O2/libgot.so
	g++ -o $@ $< -L$(SB)/O2 -lgot -Wl,-rpath,'$$ORIGIN'
$(SB)/asan/libgot.so: $(SB)/asan/pic_user.o $(SB)/asan/pic_cfg.o
	g++ $(ASAN) -shared -o $@ $^
$(SB)/asan/got: $(SB)/asan/siof_main.o $(SB)/asan/libgot.so
	g++ $(ASAN) -o $@ $< -L$(SB)/asan -lgot -Wl,-rpath,'$$ORIGIN'

# The probe fixtures (probe.hpp): each program's initializers report what they observed (0: read before
# construction), so running it is the truth; built with GCC and clang at -O0 and -O2 (GCC -O2 also with
# -fcf-protection: notrack jump tables). NAME := units in link order.
PROBE_PAIRS := ext dep xget xword
PROBE_PROGS := probe_mul probe_ref probe_unit probe_tmpl probe_rec probe_init probe_share probe_ptr probe_move probe_clone probe_inl probe_fill probe_tls probe_tlsin
probe_mul := probe_mul_user probe_mul_obj probe_box
probe_ref := probe_ref_user probe_ref_def probe_box
probe_unit := probe_unit probe_box
probe_tmpl := probe_tmpl_user probe_tmpl_inst probe_box
probe_rec := probe_rec_a probe_rec_b probe_rec_fn probe_rec_obj probe_box
probe_init := probe_init_user probe_init_def probe_init_fn probe_box
probe_share := probe_share_b probe_share_a probe_init_fn probe_box
probe_ptr := probe_ptr_user probe_ptr_def probe_box
probe_move := probe_move_set probe_move_user probe_move_def probe_box
probe_clone := probe_clone_user probe_clone_def probe_box
probe_inl := probe_inl probe_box
probe_fill := probe_fill probe_box
probe_tls := probe_tls_a probe_tls_b probe_tls_var probe_tls_def probe_box
probe_tlsin := probe_tlsin_var probe_tlsin_b probe_tlsin_def probe_box
PROBE_HDRS := probe.hpp probe_tmpl.hpp probe_ptr.hpp probe_clone.hpp probe_tls.hpp probe_tlsin.hpp
PB := $(B)/probe
PROBE_VARIANTS := $(if $(call HAVE,g++),gcc-O0 gcc-O2 gcc-O2-cet) $(if $(call HAVE,clang++),clang-O0 clang-O2)
probe_cxx = $(if $(findstring clang,$(1)),clang++,g++)
probe_opt = $(if $(findstring O0,$(1)),-O0,-O2) $(if $(findstring cet,$(1)),-fcf-protection=full)
# probe_xab_*: libB reads libA's global; libA is libB's dependency (dep), or not and loaded first or later.
PROBE_XAB := probe_xab_dep probe_xab_first probe_xab_later probe_xget probe_xword
probe: $(foreach v,$(PROBE_VARIANTS),$(foreach p,$(PROBE_PROGS) probe_ext libprobe_ext.so probe_dep $(PROBE_XAB),$(PB)/$(v)/$(p)))
define probe_variant
$(PB)/$(1)/.dir:
	mkdir -p $(PB)/$(1) && touch $$@
$(PB)/$(1)/%.o: %.cpp $(PROBE_HDRS) $(PB)/$(1)/.dir
	$(call probe_cxx,$(1)) -std=c++20 $(call probe_opt,$(1)) -g -fPIE -DPROBE_UNIT='"$$(<F)"' -c -o $$@ $$<
$(PB)/$(1)/pic_%.o: %.cpp $(PROBE_HDRS) $(PB)/$(1)/.dir
	$(call probe_cxx,$(1)) -std=c++20 $(call probe_opt,$(1)) -g -fPIC -DPROBE_UNIT='"$$(<F)"' -c -o $$@ $$<
$(PB)/$(1)/libprobe_xa.so: $(PB)/$(1)/pic_probe_xa_lib.o $(PB)/$(1)/pic_probe_box.o
	$(call probe_cxx,$(1)) -shared -o $$@ $$^
$(PB)/$(1)/libprobe_xb.so: $(PB)/$(1)/pic_probe_xb_lib.o $(PB)/$(1)/pic_probe_box.o
	$(call probe_cxx,$(1)) -shared -o $$@ $$^
$(PB)/$(1)/libprobe_xbd.so: $(PB)/$(1)/pic_probe_xb_lib.o $(PB)/$(1)/pic_probe_box.o $(PB)/$(1)/libprobe_xa.so
	$(call probe_cxx,$(1)) -shared -o $$@ $$(filter %.o,$$^) -L$(PB)/$(1) -Wl,--no-as-needed -lprobe_xa -Wl,-rpath,'$$$$ORIGIN'
$(PB)/$(1)/probe_xab_dep: $(PB)/$(1)/probe_xab_main.o $(PB)/$(1)/libprobe_xbd.so
	$(call probe_cxx,$(1)) -pie -o $$@ $$< -L$(PB)/$(1) -Wl,--no-as-needed -lprobe_xbd -Wl,-rpath,'$$$$ORIGIN'
$(PB)/$(1)/probe_xab_first: $(PB)/$(1)/probe_xab_main.o $(PB)/$(1)/libprobe_xa.so $(PB)/$(1)/libprobe_xb.so
	$(call probe_cxx,$(1)) -pie -o $$@ $$< -L$(PB)/$(1) -Wl,--no-as-needed -lprobe_xa -lprobe_xb -Wl,-rpath,'$$$$ORIGIN'
$(PB)/$(1)/probe_xab_later: $(PB)/$(1)/probe_xab_main.o $(PB)/$(1)/libprobe_xa.so $(PB)/$(1)/libprobe_xb.so
	$(call probe_cxx,$(1)) -pie -o $$@ $$< -L$(PB)/$(1) -Wl,--no-as-needed -lprobe_xb -lprobe_xa -Wl,-rpath,'$$$$ORIGIN'
$(foreach p,$(PROBE_PROGS),$(eval $(call probe_prog,$(1),$(p))))
$(foreach p,$(PROBE_PAIRS),$(eval $(call probe_pair,$(1),$(p))))
endef
# a program probe_NAME (probe_NAME_main.cpp) and the library it loads, libprobe_NAME.so (probe_NAME_lib.cpp)
define probe_pair
$(PB)/$(1)/libprobe_$(2).so: $(PB)/$(1)/pic_probe_$(2)_lib.o $(PB)/$(1)/pic_probe_box.o
	$(call probe_cxx,$(1)) -shared -o $$@ $$^
$(PB)/$(1)/probe_$(2): $(PB)/$(1)/probe_$(2)_main.o $(PB)/$(1)/libprobe_$(2).so
	$(call probe_cxx,$(1)) -pie -o $$@ $$< -L$(PB)/$(1) -lprobe_$(2) -Wl,-rpath,'$$$$ORIGIN'
endef
define probe_prog
$(PB)/$(1)/$(2): $(foreach u,$($(2)) siof_main,$(PB)/$(1)/$(u).o)
	$(call probe_cxx,$(1)) -pie -o $$@ $$^
endef
$(foreach v,$(PROBE_VARIANTS),$(eval $(call probe_variant,$(v))))
