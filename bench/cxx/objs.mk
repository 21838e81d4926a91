# Included after cppcheck's own Makefile by bench/cxx/run: its objects in link order.
print-objs:
	@echo $(LIBOBJ) $(CLIOBJ) $(EXTOBJ)
