"""What a run writes about itself besides checkpoint data, and what replay reads back.

``run_journal`` writes the run's metadata, sources and one commit per checkpoint (or per
stretch of iterations); ``stdout_capture`` tags stdout and stderr by iteration;
``loop_scalars`` notes the loop's counters, from which ``conditions`` evaluates a sparse
replay's ``if`` tests; ``jsonable`` turns ``flor.log`` values into JSON.

Imports: flor.runs, flor.sources, flor.store.
"""
