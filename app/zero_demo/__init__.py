"""The reference ZeRO demo: ZeRO stages 0-3 and offload, trained for real with torch.distributed.

Run it with ``python -m app.zero_demo --world-size 4``. It trains a small transformer-like model
once per ZeRO stage, counts the bytes every rank holds and the elements every collective moves,
and prints them beside the formulas of the card ``cards/zero-memory-offload.yaml``.

Modules, in the order a reader may want them:

- ``minimal``    the four stages in one short file, synchronous, to read first (no offload,
                 buckets or overlap); tested to compute what ``engine`` computes;
- ``config``     what one run is (stages, precision, offload, ranks, model size), without torch;
- ``model``      the model, cut into *units* (embedding, blocks, head), and its synthetic data;
- ``sharding``   flat buffers: one per unit, padded to a multiple of the world size, and shards;
- ``comm``       the collectives, wrapped so that every call is counted from its arguments;
- ``optimizer``  mixed-precision AdamW over a flat fp32 shard, on the device, in CPU RAM or
                 paged to disk;
- ``engine``     the four stages: what each holds and which collective runs where;
- ``inventory``  the exact inventory of model-state bytes and the process's peak memory;
- ``card``       the one place where the card's formulas are read and evaluated;
- ``reference``  single-process AdamW, PyTorch FSDP2 and ZeroRedundancyOptimizer, for comparison;
- ``runner``     the ranks: spawned processes (gloo on CPU, NCCL on GPUs) or torchrun;
- ``report``     the table, the JSON document and the chart;
- ``cli``        the command line.

Nothing here is imported by the web server, and this package imports torch only in its submodules.
"""
