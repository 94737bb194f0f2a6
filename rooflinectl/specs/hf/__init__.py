"""A Hugging Face ``config.json`` read as a model's fields: ``config`` (the keys of each model_type, the
architectures refused), ``experts`` (mixtures of experts and latent attention), ``quant`` (its
``quantization_config``). Nothing is downloaded."""
