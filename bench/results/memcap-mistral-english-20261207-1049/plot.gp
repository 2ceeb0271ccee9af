set datafile missing 'NaN'
set logscale y
set grid ytics mytics xtics
set key below horizontal
set xrange [-0.5:0.5]
set xlabel 'memory cap (% of the llama.cpp model file, or a size; whole process incl. page cache)'
set terminal pngcairo noenhanced size 900,600 font ',11'
set output 'tokens_per_s.png'
set title 'Decode tokens/s under a memory cap (mistral-7b Q4_0, 3.80 GiB, 2 threads)'
set ylabel 'decode tokens/s (log scale)'
plot 'plot.dat' using 1:3:xtic(2) with linespoints lw 2 lc rgb '#d62728' pt 7 title 'llama.cpp (best configuration)', 'plot.dat' using 1:4:xtic(2) with linespoints lw 2 lc rgb '#7f7f7f' pt 5 title 'Ember dense', 'plot.dat' using 1:5:xtic(2) with linespoints lw 2 lc rgb '#1f77b4' pt 9 title 'Ember sparse'
set terminal pngcairo noenhanced size 560,600 font ',11'
set xlabel 'memory cap (% of the llama.cpp model file, or a size)'
set output 'ttft.png'
set multiplot layout 1,1 title 'Time to first token under a memory cap (mistral-7b Q4_0, 3.80 GiB)'
set ylabel 'TTFT ms (log scale)'
set title '128-token prompt'
plot 'plot.dat' using 1:6:xtic(2) with linespoints lw 2 lc rgb '#d62728' pt 7 title 'llama.cpp (best configuration)', 'plot.dat' using 1:7:xtic(2) with linespoints lw 2 lc rgb '#7f7f7f' pt 5 title 'Ember dense', 'plot.dat' using 1:8:xtic(2) with linespoints lw 2 lc rgb '#1f77b4' pt 9 title 'Ember sparse'
unset multiplot
