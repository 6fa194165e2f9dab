# The soak's samples (scripts/soak): every 10 s per gateway.
# gnuplot -e "dir='target/soak'" soak.gp
# Each gateway's rows are read through awk: its samples alternate with the
# other gateways' in soak.tsv, and a line through "skipped" rows draws nothing.
set terminal pngcairo size 1400,1330 font "DejaVu Sans,10"
set output dir."/soak.png"
set datafile separator "\t"
set multiplot layout 7,1 title "Soak: every gateway sampled every 10 s (soak.md has the slopes)" noenhanced
set lmargin 12
set key top left
set grid
gw(g) = sprintf("< awk -F'\t' '$2 == %d' '%s/soak.tsv'", g, dir)
set title "resident memory (MiB; dashed: its anonymous part)"
plot for [g=1:3] gw(g) using 1:3 with lines lw 1.5 lc g title "gw".g, \
     for [g=1:3] gw(g) using 1:8 with lines lw 1 dt 2 lc g notitle
set title "Rust heap in use (MiB, eventgw_heap_bytes; dashed: its peak since start, eventgw_heap_peak_bytes)" noenhanced
plot for [g=1:3] gw(g) using 1:10 with lines lw 1.5 lc g title "gw".g, \
     for [g=1:3] gw(g) using 1:11 with lines lw 1 dt 2 lc g notitle
set title "threads"
plot for [g=1:3] gw(g) using 1:9 with lines lw 1.5 lc g title "gw".g
set title "open descriptors"
plot for [g=1:3] gw(g) using 1:4 with lines lw 1.5 title "gw".g
set title "spool bytes"
plot for [g=1:3] gw(g) using 1:5 with lines lw 1.5 title "gw".g
set title "producer queue (records)"
plot for [g=1:3] gw(g) using 1:6 with lines lw 1.5 title "gw".g
set title "shared dedupe store (Redis keys)"
set xlabel "seconds"
plot gw(1) using 1:7 with lines lw 1.5 title "keys"
unset multiplot
