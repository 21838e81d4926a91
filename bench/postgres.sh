# shellcheck shell=bash disable=SC2034 # sourced by bench/run, which uses the variables set here
# bench/postgres.sh: the PostgreSQL 15 program of bench/run, sourced by it for
# `--full --program postgres` (not a script of its own: it uses bench/run's variables and
# helpers: WORK, CFLAGS, HERE, log, die, fetch_source, objs_current).
#
# What differs from the other programs, and why:
# - The program measured is the `postgres` server executable, relinked from the backend's own
#   objects and the two server-side static libraries, with the link line `make` itself uses
#   (read from make's output, not guessed).
# - postgres refuses to run as root, so every run of it (training, BOLT's instrumented run,
#   `sediment compare`, the servers) goes through RUN_AS, which drops to PG_USER.
# - Valgrind on a multi-process server is awkward, so training and the simulated metrics use
#   single-user mode (`postgres --single`), which reads one statement per line from standard
#   input: TRAIN_IN, TEST_IN and HELDOUT_IN are the scripts, generated here deterministically.
#   Training and the measured run are the statement `pgbench -S` runs, with two different
#   sets of keys; the held-out run is pgbench's TPC-B-like transaction, which training never
#   runs (updates, an insert, commits). Its transactions come in pairs that add and then
#   subtract the same amount, so every run leaves the balances as it found them and prints
#   the same output (the output check of `sediment compare` stays meaningful).
# - Single-user postgres locks its data directory, so `sediment compare` runs one simulation
#   at a time (COMPARE_OPTS).
# - Wall time is replaced by throughput (pg_throughput, called by bench/run's step 6): for
#   every variant, a server of `default-bfd` and one of the variant run side by side on
#   127.0.0.1 (fresh copies of one initialised data directory), and `sediment stat` times a
#   fixed number of `pgbench -S` transactions against each, interleaved ABBA. The TPS ratio
#   variant/default is the inverse of stat's wall ratio B/A (mean over mean), and its 95%
#   interval the inverse of stat's (the interval is symmetric in the log-ratio, so inverting
#   both ends is exact). A first pair runs the default on both servers: the A/A control.
#   Every server started is stopped on any exit (pg_cleanup, a trap).
#
# Environment: PG_USER (the user postgres runs as when bench/run runs as root; postgres),
# PG_PORT (first of the two loopback ports; 54329), PG_TX (pgbench transactions per timed run;
# 20000), PG_CACHE (a directory holding an earlier fetch/ to reuse).

PG_USER=${PG_USER:-postgres}
PG_PORT=${PG_PORT:-54329}
PG_TX=${PG_TX:-20000}      # about 1.3 s per timed run at the 12000-25000 TPS seen here
PG_SCALE=1                 # pgbench -i -s: 100000 accounts, 13 MiB, all in shared_buffers
PG_ROWS=$((100000 * PG_SCALE))
# Sizes, tuned on this bench's 2-core VM: a single-user run costs about 25 M instructions of
# start-up and shutdown and 0.1 M per `pgbench -S` statement, and the five Valgrind runs of one
# binary take about 20 s at 2000 statements (one at a time), so the 32 binaries of SHIFTS=3
# take 10 to 20 minutes; the held-out script runs about as many instructions (210 M).
PG_TRAIN_QUERIES=3000      # training: `pgbench -S` statements, keys from seed 1
PG_TEST_QUERIES=2000       # measured: the same statement, keys from seed 2
PG_HELDOUT_PAIRS=150       # held out: 300 TPC-B-like transactions, seed 3
PG_RUNNING=()              # data directories of the servers running now

# pg_as CMD...: runs CMD as PG_USER (setpriv execs it, so `$!` of `pg_as ... &` is its pid).
pg_as() { "${RUN_AS[@]}" "$@"; }

# pg_selects N SEED: N `pgbench -S` statements, keys from the Park-Miller generator (exact in
# awk's doubles, so every awk writes the same file).
pg_selects() {
    awk -v n="$1" -v x="$2" -v rows="$PG_ROWS" 'BEGIN {
        for (i = 0; i < n; i++) {
            x = (x * 16807) % 2147483647
            printf "SELECT abalance FROM pgbench_accounts WHERE aid = %d\n", 1 + x % rows
        }
    }'
}

# pg_tpcb PAIRS SEED: pgbench's TPC-B-like transaction (its built-in tpcb-like script, one
# statement per line), in pairs that add and then subtract the same delta.
pg_tpcb() {
    awk -v n="$1" -v x="$2" -v scale="$PG_SCALE" -v rows="$PG_ROWS" '
    function next_rand(m) { x = (x * 16807) % 2147483647; return x % m }
    function txn(a, t, b, d) {
        print "BEGIN"
        printf "UPDATE pgbench_accounts SET abalance = abalance + %d WHERE aid = %d\n", d, a
        printf "SELECT abalance FROM pgbench_accounts WHERE aid = %d\n", a
        printf "UPDATE pgbench_tellers SET tbalance = tbalance + %d WHERE tid = %d\n", d, t
        printf "UPDATE pgbench_branches SET bbalance = bbalance + %d WHERE bid = %d\n", d, b
        printf "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (%d, %d, %d, %d, CURRENT_TIMESTAMP)\n", t, b, a, d
        print "END"
    }
    BEGIN {
        for (i = 0; i < n; i++) {
            a = 1 + next_rand(rows); t = 1 + next_rand(10 * scale); b = 1 + next_rand(scale)
            d = next_rand(10001) - 5000
            txn(a, t, b, d)
            txn(a, t, b, -d)
        }
    }'
}

# pg_wait_ready PORT LOG: waits up to 60 s for a server to accept connections on PORT.
pg_wait_ready() {
    local i
    for ((i = 0; i < 600; i++)); do
        inst/bin/pg_isready -q -h 127.0.0.1 -p "$1" -U postgres && return 0
        sleep 0.1
    done
    die "the server on port $1 did not start in 60 s (see $2)"
}

# pg_launch BIN DIR PORT [OPTION...]: a server of BIN on DIR, on 127.0.0.1:PORT only (no Unix
# socket), in the background; returns when it accepts connections.
pg_launch() {
    local bin=$1 dir=$2 port=$3 rc=0
    shift 3
    inst/bin/pg_isready -q -h 127.0.0.1 -p "$port" -U postgres || rc=$?
    ((rc == 2)) || die "port $port is in use (set PG_PORT to a free pair of ports)"
    PG_RUNNING+=("$dir")
    pg_as "$bin" -D "$dir" -p "$port" -c listen_addresses=127.0.0.1 -c unix_socket_directories= \
        "$@" >"$dir.log" 2>&1 &
    pg_wait_ready "$port" "$WORK/$dir.log"
}

# pg_start BIN DIR PORT: pg_launch on a fresh copy of data0 in DIR, without autovacuum (the
# select-only load changes nothing it would act on; it would only add noise).
pg_start() {
    rm -rf "$2"
    cp -a data0 "$2"
    pg_launch "$1" "$2" "$3" -c autovacuum=off
}

# pg_stop DIR: a fast shutdown of the server on DIR, which is then forgotten.
pg_stop() {
    pg_as inst/bin/pg_ctl stop -s -D "$1" -m fast
    local keep=() d
    for d in "${PG_RUNNING[@]}"; do [[ $d == "$1" ]] || keep+=("$d"); done
    PG_RUNNING=("${keep[@]}")
}

# pg_cleanup: the EXIT trap; stops, immediately, every server still running.
pg_cleanup() {
    local d
    for d in "${PG_RUNNING[@]}"; do
        [[ -f $WORK/$d/postmaster.pid ]] &&
            pg_as "$WORK/inst/bin/pg_ctl" stop -s -D "$WORK/$d" -m immediate 2>/dev/null
    done
    PG_RUNNING=()
    return 0
}

# pg_build: fetches, configures, builds and installs PostgreSQL into inst/ (reused when the
# flags are today's), then relinks `postgres` once with make to capture its link line.
pg_build() {
    [[ -n ${PG_CACHE:-} && ! -e fetch ]] && ln -s "$PG_CACHE/fetch" fetch
    ls -d fetch/postgresql-15-15.*/ >/dev/null 2>&1 || fetch_source postgresql-15
    SRC=$(ls -d fetch/postgresql-15-15.*/ | head -n 1)
    SRC=${SRC%/}
    if ! objs_current build/flags || [[ ! -x inst/bin/postgres ]]; then
        log "building PostgreSQL from $SRC (configure, make -j2, make install: several minutes)"
        rm -rf build inst
        mkdir -p build
        (cd build && "../$SRC/configure" --prefix="$WORK/inst" --without-readline --without-icu \
            --without-zlib CFLAGS="${CFLAGS[*]}" >configure.log 2>&1) ||
            die "configure failed (see $WORK/build/configure.log)"
        make -C build -j2 >build/make.log 2>&1 || die "make failed (see $WORK/build/make.log)"
        make -C build install >build/install.log 2>&1 || die "make install failed (see $WORK/build/install.log)"
        echo "${CFLAGS[*]}" >build/flags
    fi
    # The link line as make runs it: make relinks the executable it no longer finds.
    rm -f build/src/backend/postgres
    make -C build/src/backend postgres >build/link.log 2>&1 || die "relinking postgres failed (see $WORK/build/link.log)"
    local line
    line=$(grep -E -- ' -o postgres( |$)' build/link.log) || die "$WORK/build/link.log: no link line for postgres"
    # Objects and archives in make's order, flags that the link needs; the compile flags on the
    # line do nothing at link time, and the rpath names a directory no library comes from.
    local w paths=()
    OBJS=()
    LIBS=()
    for w in $line; do
        case $w in
        *.o | *.a) paths+=("build/src/backend/$w") ;;
        -L*) LIBS+=("-L$(realpath -m --relative-to=. "build/src/backend/${w#-L}")") ;;
        -Wl,-rpath*) ;;
        -l* | -Wl,*) LIBS+=("$w") ;;
        esac
    done
    mapfile -t OBJS < <(realpath -m --relative-to=. "${paths[@]}")
    ((${#OBJS[@]} > 100)) || die "$WORK/build/link.log: only ${#OBJS[@]} objects on the postgres link line"
    PG_OBJS=("${OBJS[@]}") # blocks_objs maps these into a clang tree
    local o
    for o in "${OBJS[@]}"; do
        [[ $o == build/* ]] || die "$WORK/build/link.log: $o is outside the build tree"
    done
    # Variants run as bin/vNN-sK; postgres finds its share/ and lib/ relative to its own
    # directory (make_relative_path: .../bin -> ../share), so those sit beside bin/.
    ln -sfn inst/share share
    ln -sfn inst/lib lib
}

# The block-level flow (bench/run's step 4b) on PostgreSQL: blocks_cc SET CC FLAGS... configures
# a build tree of its own, obj-clang/SET, with CC and CFLAGS (the gcc build's configure options)
# and makes the backend in it (`all`: the generated headers first, then `postgres` with the
# objects of src/timezone and the server-side libraries of src/common and src/port that it
# links; `make postgres` alone skips the headers in a fresh tree); the make is the timed step
# clang-SET. blocks_objs SET: the same objects and archives as the gcc link line (PG_OBJS), in
# the same order, from that tree. A configured tree is reused only for the same flags (bench/run's
# cc_set redoes a set whose flags changed; the list build's list file has an absolute path, since
# make compiles in every subdirectory). The data directory initdb made with the gcc build serves
# the clang builds too: same version, same platform, same configure options.
blocks_cc() {
    local set=$1 cc=$2
    shift 2
    local tree=obj-clang/$set
    rm -rf "$tree"
    mkdir -p "$tree"
    log "configuring and making the backend with $cc in $tree (several minutes)"
    (cd "$tree" && "$WORK/$SRC/configure" --prefix="$WORK/inst" --without-readline --without-icu \
        --without-zlib CC="$cc" CFLAGS="$*" >configure.log 2>&1) ||
        die "configure with $cc failed (see $WORK/$tree/configure.log)"
    timed "clang-$set" make -C "$tree/src/backend" -j2 all >"$tree/make.log" 2>&1 ||
        die "make with $cc failed (see $WORK/$tree/make.log)"
}
blocks_objs() {
    local o
    for o in "${PG_OBJS[@]}"; do printf '%s\n' "obj-clang/$1/${o#build/}"; done
}

# pg_init_data: data0, a freshly initialised cluster with `pgbench -i -s PG_SCALE` (made by the
# default build's own server), and data, its copy that the single-user runs use.
pg_init_data() {
    local d
    for d in data0 data data-a data-b; do rm -rf "$d" "$d.log"; done
    mkdir -m 700 data0
    [[ -n ${RUN_USER:-} ]] && chown "$RUN_USER" data0
    pg_as inst/bin/initdb -D data0 -A trust -U postgres -E UTF8 --locale=C --no-sync >initdb.log 2>&1 ||
        die "initdb failed (see $WORK/initdb.log)"
    pg_launch inst/bin/postgres data0 "$PG_PORT"
    inst/bin/pgbench -q -i -s "$PG_SCALE" -h 127.0.0.1 -p "$PG_PORT" -U postgres postgres >pgbench-init.log 2>&1 ||
        die "pgbench -i failed (see $WORK/pgbench-init.log)"
    pg_stop data0
    cp -a data0 data
}

# pg_setup: everything bench/run's program branch defines for postgres.
pg_setup() {
    PROGRAM="PostgreSQL 15 server (Debian source package postgresql-15) in single-user mode; pgbench -S throughput"
    if [[ $(id -u) == 0 ]]; then
        RUN_USER=$PG_USER
        id -u "$RUN_USER" >/dev/null 2>&1 || useradd --system --no-create-home "$RUN_USER"
        RUN_AS=(setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups)
    fi
    trap pg_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    pg_build
    pg_init_data
    pg_selects "$PG_TRAIN_QUERIES" 1 >train.sql
    pg_selects "$PG_TEST_QUERIES" 2 >test.sql
    pg_tpcb "$PG_HELDOUT_PAIRS" 3 >heldout.sql
    TRAIN_IN=$WORK/train.sql
    TEST_IN=$WORK/test.sql
    HELDOUT_IN=$WORK/heldout.sql
    # -F: no fsync (the held-out commits would wait on the disk, not run code).
    TRAIN=(--single -F -D "$WORK/data" postgres)
    TEST=("${TRAIN[@]}")
    HELDOUT=("${TRAIN[@]}")
    COMPARE_OPTS=(--jobs 1)
    THROUGHPUT="pgbench -S -n -c 1 -j 1 -t $PG_TX"
    SHIFTS=${SHIFTS:-3}
    STAT_RUNS=${STAT_RUNS:-10}
    # The block flow on a sample-PGO build makes the backend three more times (about 15 minutes
    # on a 2-core machine): only when asked for.
    PGO_BLOCKS=${PGO_BLOCKS:-0}
}

# pg_throughput DEFAULT VARIANT...: bench/run's step 6 for postgres (see the top of this file);
# writes steps/stat-V.json for the V-th VARIANT (from 1), as the other programs' step 6 does,
# and first steps/stat-aa.json, DEFAULT against itself: the A/A control, which shows what the
# setup alone (second server, second port, start order) does to the ratio.
pg_throughput() {
    local v out bins=("$@") pb=(inst/bin/pgbench -S -n -c 1 -j 1 -t "$PG_TX" -h 127.0.0.1 -U postgres)
    log "throughput of ${#bins[@]} variants against default-bfd (and A/A): sediment stat -n $STAT_RUNS of $THROUGHPUT"
    for ((v = 0; v < ${#bins[@]}; v++)); do
        out=steps/stat-$v.json
        ((v > 0)) || out=steps/stat-aa.json
        pg_start "${bins[0]}" data-a "$PG_PORT"
        pg_start "${bins[$v]}" data-b $((PG_PORT + 1))
        "$SEDIMENT" stat -n "$STAT_RUNS" --json -- "${pb[@]}" -p "$PG_PORT" postgres \
            ::: "${pb[@]}" -p $((PG_PORT + 1)) postgres >"$out"
        pg_stop data-a
        pg_stop data-b
    done
}
