# The soak's samples (scripts/soak): every 10 s per gateway.
# gnuplot -e "dir='target/soak'" soak.gp
set terminal pngcairo size 1400,1000 font "DejaVu Sans,10"
set output dir."/soak.png"
set datafile separator "\t"
set multiplot layout 5,1 title "Soak: ".dir noenhanced
set lmargin 12
set key top left
set grid
set title "resident memory (MiB)"
plot for [g=1:3] dir."/soak.tsv" using ($2==g?$1:1/0):3 with lines lw 1.5 title "gw".g
set title "open descriptors"
plot for [g=1:3] dir."/soak.tsv" using ($2==g?$1:1/0):4 with lines lw 1.5 title "gw".g
set title "spool bytes"
plot for [g=1:3] dir."/soak.tsv" using ($2==g?$1:1/0):5 with lines lw 1.5 title "gw".g
set title "producer queue (records)"
plot for [g=1:3] dir."/soak.tsv" using ($2==g?$1:1/0):6 with lines lw 1.5 title "gw".g
set title "shared dedupe store (Redis keys)"
set xlabel "seconds"
plot dir."/soak.tsv" using ($2==1?$1:1/0):7 with lines lw 1.5 title "keys"
unset multiplot
