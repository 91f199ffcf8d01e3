"""Beyond one machine: a URLLC cell shared by many users, in simulation (issue 41, item 5).

* `logs`: the agents' decision logs of one page load -> a per-user inner-packet
  trace (the input of `llcsim`, crates/llcsim).
* `demand`: a trace's LLC demand: bits per page load, per second of browsing under
  a think-time model, and its burstiness (peak rate over 10 / 100 ms windows).
* `grid`: runs `llcsim` over a grid of cells (users x capacity x rule x seed), sharded
  over Ray or run in this process, results to parquet.
* `capacity`: what a cell of C carries, on paper (from the demand) and from the grid.

docs/llc_sharing.md ("Beyond one machine") has the numbers and what the simulation
leaves out.
"""
