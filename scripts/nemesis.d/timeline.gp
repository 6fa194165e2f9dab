# The timeline of one nemesis run (scripts/nemesis): faults as bands, and
# per second the events acknowledged, the share of requests not answered
# 200 and the p99 answer time. gnuplot -e "dir='target/nemesis/seed-N'" timeline.gp
set terminal pngcairo size 1400,1000 font "DejaVu Sans,10"
set output dir."/timeline.png"
set datafile separator "\t"
set multiplot layout 4,1 title "Nemesis run: ".dir noenhanced
set lmargin 12
set rmargin 4
set xrange [0:*]
set grid xtics
unset key

set title "faults (one band each; lanes: broker, gateway, network, redis, disk, clock)"
set ytics ("broker" 0, "gateway" 1, "net" 2, "redis" 3, "disk" 4, "clock" 5)
set yrange [-0.6:5.6]
set style fill solid 0.6 border -1
plot dir."/faults.tsv" using (($2+$3)/2):1:(($3-$2)/2):(0.35):($1+1) with boxxyerror lc variable, \
     dir."/faults.tsv" using 2:($1+0.45):4 with labels left font ",7" noenhanced

set title "events acknowledged per second (through the balancer)"
set ytics auto
set yrange [0:*]
plot dir."/timeline.tsv" using 1:6 with steps lw 1.5 lc rgb "#2060c0"

set title "error rate (requests not answered 200, per second)"
set yrange [0:1.05]
plot dir."/timeline.tsv" using 1:4 with steps lw 1.5 lc rgb "#c03020"

set title "p99 answer time per second (ms)"
set xlabel "seconds from the start of the load"
set yrange [0:*]
plot dir."/timeline.tsv" using 1:5 with steps lw 1.5 lc rgb "#208040"
unset multiplot
