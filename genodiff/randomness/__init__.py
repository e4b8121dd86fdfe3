"""Where random numbers come from: ``noise`` (one stream per sequence or per scored window, or
one generator for a batch) and ``staging`` (numbers drawn on the CPU sent to the device without
a step waiting for it); ``kept``: the caller's global random state, as it was after a loader
built its modules. Below the forward processes, samplers and objectives that draw them."""
