#!/bin/sh
# A small mixed I/O workload for `make demo`: large sequential writes with fsync, cached
# re-reads, direct (uncached) reads, many small files through tar, checksums, a database
# and random positional reads. Usage: workload.sh WORK_DIR
set -eu
work=$1
mkdir -p "$work/src"
cd "$work"

dd if=/dev/urandom of=big.dat bs=1M count=64 conv=fsync status=none
dd if=big.dat of=/dev/null bs=4k status=none
dd if=big.dat of=/dev/null bs=1M iflag=direct status=none 2>/dev/null || true

i=0
while [ $i -lt 200 ]; do
    head -c $((i * 37 + 1)) big.dat > "src/part$i.bin"
    i=$((i + 1))
done
tar -cf parts.tar src
mkdir -p extracted
tar -xf parts.tar -C extracted
sha256sum big.dat parts.tar > sums.txt

if command -v sqlite3 >/dev/null 2>&1; then
    sqlite3 demo.db "create table t(k integer primary key, v text);
        with recursive n(i) as (select 1 union all select i + 1 from n where i < 20000)
        insert into t(v) select hex(randomblob(32)) from n;
        select count(*) from t;" > /dev/null
fi

python3 - <<'PY'
import os, random
fd = os.open("big.dat", os.O_RDONLY)
size = os.fstat(fd).st_size
rng = random.Random(1)
for _ in range(20000):
    os.pread(fd, 4096, rng.randrange(0, size - 4096))
os.close(fd)
PY
