"""What each op of a step counts, FLOPs and HBM bytes, each rule beside its code: ``op`` (the Op and the
primitive constructors), ``transformer`` (a step's ops, block by block), ``block`` (a linear layer in the weight
format, the residual), ``attention`` (the GQA core, windows, a mixed step's groups), ``mla`` (latent attention),
``moe`` (the experts a step touches), ``quant`` (weight formats), ``attention_io`` (flash attention's tiled IO
for the measured kernels)."""
