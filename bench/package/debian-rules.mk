# Sediment (docs/guide/packaging.md): every executable and shared library of the package is
# linked in the order of its profile, debian/sediment/<output file name>.sprof, when sediment
# is installed; without it, or without a profile for an output, that link is unchanged.
# The linker shims come in through a GCC specs file: libtool drops a bare -B from the link of
# a shared library, but passes -specs= on. `sediment wrappers` writes the specs file beside the
# shims; without sediment it stays empty (gcc accepts that). SEDIMENT_SETUP runs first in
# override_dh_auto_configure.
SEDIMENT_LD := $(CURDIR)/debian/.sediment-ld
SEDIMENT_SETUP = mkdir -p $(SEDIMENT_LD) && : >$(SEDIMENT_LD)/gcc.specs && if command -v sediment >/dev/null; then sediment wrappers --prof-dir $(CURDIR)/debian/sediment $(SEDIMENT_LD) >/dev/null; fi
export DEB_CFLAGS_MAINT_APPEND = -ffunction-sections
export DEB_LDFLAGS_MAINT_APPEND = -ffunction-sections -specs=$(SEDIMENT_LD)/gcc.specs
