"""Forward noise processes and their schedules: what corrupts a clean sequence at time t, shared
by the objectives (their losses) and the samplers (their reverse steps).

``schedules`` (alpha_t, sigma(t)), ``masked`` (absorbing-state masking: MDLM, SEDD, D3PM),
``uniform`` and ``uniform_posterior`` (uniform noise over an alphabet: UDLM), ``time_draws``
(low-discrepancy times).
"""
