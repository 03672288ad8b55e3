# quantmake — see README.md and CONTRIBUTING.md.
# Compiler outputs live under obj/ (build/ is where projects put their models).

PREFIX   ?= /usr/local
CC       ?= cc
# OpenBLAS, libgit2 and libarchive are compiled against but not linked:
# src/blas.c and src/lazylib.c load them on first use (see there why).
PKGS      = libprotobuf-c libxxhash inih jansson nettle minizip zlib libcurl
LAZY_PKGS = openblas libgit2 libarchive
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) $(LAZY_PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
soname = $(shell objdump -p $$(pkg-config --variable=libdir $(1))/$(2).so 2>/dev/null | awk '/SONAME/{print $$2}')
ONNX_PROTO ?= /usr/include/onnx/onnx.proto

# SANITIZE=1 builds into obj/asan with AddressSanitizer and UBSan (make check uses it).
ifeq ($(SANITIZE),1)
OBJ      ?= obj/asan
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT      ?= -O1 -g
else
OBJ      ?= obj/release
SANFLAGS :=
OPT      ?= -O2 -g
endif

WARN     = -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wvla -Wformat=2
# clang (make CC=clang, the fuzz targets) ignores GCC's optimize and ivdep
# pragmas: hints, not semantics
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -1)),)
WARN    += -Wno-unknown-pragmas
endif
CFLAGS  ?=
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(WARN) $(SANFLAGS) -pthread \
             -Isrc -I$(OBJ)/gen $(PKG_CFLAGS) $(CFLAGS)
LDLIBS   = -Wl,--as-needed $(PKG_LIBS) -lm -ldl -pthread

SRCS := $(sort $(shell find src -name '*.c'))
OBJS := $(SRCS:%.c=$(OBJ)/%.o) $(OBJ)/gen/onnx.pb-c.o $(OBJ)/gen/reapi.pb-c.o $(OBJ)/gen/op_registry.o $(OBJ)/gen/opset_table.o
BIN  := $(OBJ)/quantmake

.PHONY: all clean check deps install bench example fuzz fuzz-build
all: quantmake

quantmake: $(BIN)
	@if [ "$(SANITIZE)" != 1 ]; then cp -f $(BIN) quantmake; fi

$(BIN): $(OBJS)
	$(CC) $(ALL_CFLAGS) -o $@ $(OBJS) $(LDLIBS)

# protobuf-c code is generated at build time from the system's onnx.proto.
$(OBJ)/gen/onnx.pb-c.c $(OBJ)/gen/onnx.pb-c.h &: $(ONNX_PROTO)
	@mkdir -p $(OBJ)/gen/onnx
	cp -f $(ONNX_PROTO) $(OBJ)/gen/onnx.proto
	cd $(OBJ)/gen && protoc-c --c_out=. onnx.proto

$(OBJ)/gen/onnx.pb-c.o: $(OBJ)/gen/onnx.pb-c.c
	$(CC) $(ALL_CFLAGS) -Wno-error -c -o $@ $<

# The remote cache's action entries (REAPI ActionResult): protobuf-c code
# generated at build time from the few messages src/reapi.proto declares.
$(OBJ)/gen/reapi.pb-c.c $(OBJ)/gen/reapi.pb-c.h &: src/reapi.proto
	@mkdir -p $(OBJ)/gen
	cp -f src/reapi.proto $(OBJ)/gen/reapi.proto
	cd $(OBJ)/gen && protoc-c --c_out=. reapi.proto

$(OBJ)/gen/reapi.pb-c.o: $(OBJ)/gen/reapi.pb-c.c
	$(CC) $(ALL_CFLAGS) -Wno-error -c -o $@ $<

$(OBJ)/src/remote_action.o: $(OBJ)/gen/reapi.pb-c.h

# The operator table is generated from the OPERATOR(...) lines in src/ops/*.c.
$(OBJ)/gen/op_registry.c: $(wildcard src/ops/*.c) tools/gen-registry.sh
	@mkdir -p $(OBJ)/gen
	sh tools/gen-registry.sh src/ops/*.c > $@.tmp && mv $@.tmp $@

$(OBJ)/gen/op_registry.o: $(OBJ)/gen/op_registry.c $(OBJ)/gen/onnx.pb-c.h
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# preprocess.opset's table of operator schema versions, from the data file
# tools/gen-opset-table.py writes out of ONNX's schemas.
$(OBJ)/gen/opset_table.c: src/preprocess/opset-history.txt tools/gen-opset-table.sh
	@mkdir -p $(OBJ)/gen
	sh tools/gen-opset-table.sh src/preprocess/opset-history.txt > $@.tmp && mv $@.tmp $@

$(OBJ)/gen/opset_table.o: $(OBJ)/gen/opset_table.c $(OBJ)/gen/onnx.pb-c.h
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(OBJ)/%.o: %.c $(OBJ)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(OBJ)/src/lazylib.o: ALL_CFLAGS += -DGIT2_SONAME='"$(call soname,libgit2,libgit2)"' -DARCHIVE_SONAME='"$(call soname,libarchive,libarchive)"'

# XXH3 with AVX2 for file hashing, chosen at run time (src/hash.c)
$(OBJ)/src/hash_avx2.o: ALL_CFLAGS += -mavx2

-include $(OBJS:.o=.d)

# libFuzzer targets (fuzz/, clang): `make fuzz-build` builds them into
# obj/fuzz with ASan and UBSan; `make fuzz` also runs each for FUZZ_SECONDS
# on a corpus seeded from ONNX's test data (obj/fuzz/corpus/NAME), and
# keeps what crashes in obj/fuzz/crash-NAME-*. See fuzz/README.md.
FUZZ_TARGETS = model rules npy npz pb archive
FUZZ_SECONDS ?= 60
# FUZZ_OPT=-O0 builds them in a few minutes (tests/t_fuzz.sh: a check that
# they build and run); long runs want the default
FUZZ_OPT ?= -O1 -g
FUZZ_SAN = -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

fuzz-build:
	$(MAKE) CC=clang OBJ=obj/fuzz SANFLAGS='$(FUZZ_SAN)' OPT='$(FUZZ_OPT)' \
		$(FUZZ_TARGETS:%=obj/fuzz/fuzz_%)

fuzz: fuzz-build
	sh fuzz/run.sh obj/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

$(OBJ)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(filter-out $(OBJ)/src/main.o,$(OBJS))
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(filter-out $(OBJ)/src/main.o,$(OBJS)) $(LDLIBS)

# Installs the Debian packages and the PyPI test oracles (idempotent).
deps:
	sh scripts/install-deps.sh
	sh scripts/venv.sh

# The test command of README.md: installs what it needs, builds with
# sanitizers and warnings as errors, runs every test.
check: deps
	$(MAKE) -j$$(nproc) SANITIZE=1 obj/asan/quantmake
	$(MAKE) -j$$(nproc) quantmake
	QUANTMAKE=$(CURDIR)/obj/asan/quantmake sh tests/run.sh

# Sets everything up and builds the repository's example models (rules/).
example: deps
	$(MAKE) -j$$(nproc) quantmake
	./quantmake all

bench: quantmake
	.venv/bin/python bench/core.py --big-gib 1

install: quantmake
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 755 quantmake $(DESTDIR)$(PREFIX)/bin/quantmake
	install -m 644 doc/quantmake.1 $(DESTDIR)$(PREFIX)/share/man/man1/quantmake.1

clean:
	rm -rf obj quantmake
