"""Solvers of the ranking family, plain functions ``(data, model, settings, ..., run) ->
(model, n_iter, info)``: :func:`.sampled.sampled_solver` (BPR and WARP by SGD or Adagrad) and
:func:`.icd.icd_solver` (implicit coordinate descent on the all-negatives squared loss)."""
