#!/bin/sh
# signoff run 20261205T182048Z-vm-22593: the hosts to drain, as the inventory names them (Slurm node names); review, then run
set -e
scontrol update nodename="lab3" state=drain reason="signoff 20261205T182048Z-vm-22593: net_pair_bandwidth FAIL: transmit side slow on every pair it sends (+1 more)"
