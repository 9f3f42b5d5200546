#!/bin/sh
# The stand-in tree's small build: what `zig build ... --prefix /opt/tensorfold fatbins install native`
# leaves, without a compiler: the program at native/bin/tensorfold-native, the kernel set for
# sm_120 (a folder with aot.json), and the patched file the tests read back.
set -eu
install -D -m 0755 native/tensorfold-native /opt/tensorfold/native/bin/tensorfold-native
install -D -m 0644 native/series.txt /opt/tensorfold/native/share/series.txt
install -D -m 0644 kernels/sm_120/aot.json /opt/tensorfold/kernels/sm_120/aot.json
