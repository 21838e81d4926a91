//! Every run of a program under valgrind, in one place: cachegrind, callgrind, lackey and
//! Sediment's own trace tool. Children die with Sediment; a binary's results can be cached.
