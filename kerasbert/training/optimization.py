"""AdamW with BERT's recipe: linear warmup, linear decay to 0, no decay on LayerNorm/bias.

Keras 3 core has everything that used to come from tensorflow-addons / BERT's own
optimization.py: AdamW with `exclude_from_weight_decay`, and learning-rate schedules.
"""

import keras
import tensorflow as tf


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak·step/warmup during warmup, then peak·(total−step)/(total−warmup).

    The peak is reached exactly at the end of warmup (HuggingFace's
    `get_linear_schedule_with_warmup`); the rate is 0 from `total_steps` on.
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps):
        self.peak_learning_rate = float(peak_learning_rate)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.peak_learning_rate, tf.float32)
        warmup = tf.constant(float(self.warmup_steps), tf.float32)
        total = tf.constant(float(self.total_steps), tf.float32)
        warm = peak * step / tf.maximum(warmup, 1.0)
        decay = peak * tf.maximum(total - step, 0.0) / tf.maximum(total - warmup, 1.0)
        return tf.where(step < warmup, warm, decay)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate,
                "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


def is_excluded_from_weight_decay(variable):
    """LayerNorm scales/offsets and all biases are not decayed (BERT's AdamWeightDecay).

    keras-hub names them .../embeddings_layer_norm/{gamma,beta},
    .../self_attention_layer_norm/..., .../feedforward_layer_norm/... and .../bias.
    """
    path = variable.path
    leaf = path.rsplit("/", 1)[-1]
    return leaf == "bias" or "layer_norm" in path or "layernorm" in path.lower()


class FusedAdamW(keras.optimizers.AdamW):
    """Keras' AdamW, each variable's update one fused TF kernel.

    Keras builds every variable's step from ~50 small ops (the schedule evaluated again
    for each variable's weight decay, β powers, casts, three assigns): for MiniLM's 105
    variables that is 5,300 of the training step's 9,200 graph ops, ~40% of its tracing
    time before the first step, and as many kernel launches each step. Here a variable's
    step is the decoupled decay w ← w − lr·wd·w (the same rule, with the learning rate of
    the step, as Keras applies it first) and `ResourceApplyAdam`, TF's kernel of the same
    update Keras computes (m ← m + (g − m)(1 − β1), v likewise with g², w ← w −
    lr·√(1 − β2ᵗ)/(1 − β1ᵗ) · m/(√v + ε)); the β powers are computed once per step.
    A TPU strategy and amsgrad take Keras' own path. Same variables as Keras' AdamW, so
    checkpoints are interchangeable.

    `bias_correction=False` (--adam_bias_correction=false) is google-research/bert's
    AdamWeightDecay: m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g², w ← w − lr·(m/(√v + ε) +
    wd·w), with no 1 − βᵗ factors. The fused path gives ResourceApplyAdam β powers of 0,
    which make its factor √(1 − 0)/(1 − 0) exactly 1 and leave ε on √v; Keras' path gets
    the same three lines written out. The decay is applied first, as above, with the same
    lr and on the weight before the step, as BERT's `wd·w` is: w − lr·wd·w − lr·m/(√v + ε)
    is BERT's update, only rounded in another order.

    Two places where it differs from Keras' AdamW, both to take the step of Adam's
    Algorithm 1, as PyTorch's AdamW (HuggingFace) takes it:
    - ε is added to the bias-corrected √v̂, not to √v: Keras' form is ε/√(1 − β2ᵗ) in
      these terms, 32× larger at the first step (3e-5 for ε 1e-6), still 2× at step ~290,
      large against the √v̂ of the many small gradients early in fine-tuning. Both paths
      are given ε·√(1 − β2ᵗ), which is the same thing in Keras' formula.
    - A sparse gradient (`tf.IndexedSlices`, an embedding's) is summed into a dense one
      first: Keras applies it row by row, the moments' decay and g² once per repeat of
      an id, so a token seen 100 times in a batch gets v = Σ g_i² instead of (Σ g_i)².
    """

    # Variables (their keys) that step at a multiple of the scheduled rate, and that
    # multiple: a head with a learning rate of its own (--head_learning_rate).
    scaled_keys, rate_factor = frozenset(), 1.0

    def __init__(self, *args, bias_correction=True, **kwargs):
        super().__init__(*args, **kwargs)
        if self.amsgrad and not bias_correction:
            raise ValueError("amsgrad has no form without bias correction")
        self.bias_correction = bool(bias_correction)

    def get_config(self):
        return {**super().get_config(), "bias_correction": self.bias_correction}

    def scale_rate(self, variables, factor):
        """From now on `variables` step, and decay, at `factor` × the scheduled rate."""
        self.scaled_keys = frozenset(self._var_key(v) for v in variables)
        self.rate_factor = float(factor)

    def _rate(self, variable, learning_rate):
        if self._var_key(variable) in self.scaled_keys:
            return learning_rate * self.rate_factor
        return learning_rate

    def _fused(self):
        return not isinstance(self._distribution_strategy, tf.distribute.TPUStrategy)

    def _apply_weight_decay(self, variables):
        if self._fused():
            return  # decayed in update_step, with the step's learning rate already at hand
        plain = [v for v in variables if self._var_key(v) not in self.scaled_keys]
        super()._apply_weight_decay(plain)
        for variable in variables:
            if self._var_key(variable) in self.scaled_keys and self._use_weight_decay(variable):
                self._decay(variable, self._rate(variable, self.learning_rate))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        step = tf.cast(self.iterations + 1, tf.float32)
        if self.bias_correction:
            self._step_powers = (tf.pow(tf.cast(self.beta_1, tf.float32), step),
                                 tf.pow(tf.cast(self.beta_2, tf.float32), step))
        else:  # βᵗ taken as 0: no 1 − βᵗ factors, ε on √v (see the class doc)
            self._step_powers = (tf.constant(0.0), tf.constant(0.0))
        # β1, β2 and the step's ε made once per step, not once per variable: ~7 fewer graph
        # ops per variable (735 of MiniLM's 5,603) to trace and instantiate; the same values.
        self._step_constants = (tf.cast(self.beta_1, tf.float32),
                                tf.cast(self.beta_2, tf.float32), self._step_epsilon())
        try:
            super()._backend_update_step(grads, trainable_variables, learning_rate)
        finally:
            self._step_powers = self._step_constants = None

    def _step_epsilon(self):
        """ε on √v̂ (Adam's Algorithm 1) written as the ε of Keras' and TF's √v form."""
        return self.epsilon * tf.sqrt(1.0 - self._step_powers[1])

    def update_step(self, gradient, variable, learning_rate):
        if isinstance(gradient, tf.IndexedSlices):  # repeats summed (see the class doc)
            gradient = tf.convert_to_tensor(gradient)
        learning_rate = self._rate(variable, learning_rate)
        fused = self._fused()
        if fused and self._use_weight_decay(variable):  # else Keras' _apply_weight_decay did
            self._decay(variable, learning_rate)
        if not fused and not self.bias_correction:
            return self._uncorrected_step(gradient, variable, learning_rate)
        if not fused or self.amsgrad:
            epsilon, self.epsilon = self.epsilon, self._step_epsilon()
            try:  # Keras reads self.epsilon while it builds this variable's update
                return super().update_step(gradient, variable, learning_rate)
            finally:
                self.epsilon = epsilon
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        beta_1_power, beta_2_power = (tf.cast(p, dtype) for p in self._step_powers)
        beta_1, beta_2, epsilon = (tf.cast(c, dtype) for c in self._step_constants)
        tf.raw_ops.ResourceApplyAdam(
            var=_handle(variable), m=_handle(m), v=_handle(v),
            beta1_power=beta_1_power, beta2_power=beta_2_power, lr=lr,
            beta1=beta_1, beta2=beta_2, epsilon=epsilon, grad=tf.cast(gradient, dtype),
            use_locking=False)

    def _uncorrected_step(self, gradient, variable, learning_rate):
        """BERT's AdamWeightDecay step on Keras' path (its decay was applied before)."""
        dtype = variable.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index], self._velocities[index]
        g = tf.cast(gradient, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        self.assign(m, beta_1 * m + (1 - beta_1) * g)
        self.assign(v, beta_2 * v + (1 - beta_2) * tf.square(g))
        self.assign_sub(variable, tf.cast(learning_rate, dtype) * m
                        / (tf.sqrt(v) + tf.cast(self.epsilon, dtype)))

    def _decay(self, variable, learning_rate):
        v = variable.value if isinstance(variable, keras.Variable) else variable
        v.assign_sub(v * tf.cast(self.weight_decay, v.dtype) * tf.cast(learning_rate, v.dtype))


def _handle(variable):
    """The resource handle of a Keras or TF variable (inside a strategy's update(), a
    distributed variable's handle is the local replica's)."""
    if isinstance(variable, keras.Variable):
        variable = variable.value
    return variable.handle


def create_optimizer(variables, learning_rate, total_steps, warmup_steps, weight_decay=0.01,
                     head_variables=(), head_learning_rate=None, bias_correction=True):
    """AdamW over `variables` with BERT's hyper-parameters (β2 0.999, ε 1e-6); with
    `head_learning_rate`, `head_variables` follow the same warmup and decay to that peak;
    without `bias_correction`, BERT's own AdamWeightDecay (FusedAdamW's doc).

    Gradient clipping (global norm 1.0) is done by the training loop, after the
    cross-replica sum, so it is the same clip for every tf.distribute strategy.
    """
    optimizer = FusedAdamW(
        learning_rate=WarmupLinearDecay(learning_rate, total_steps, warmup_steps),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        bias_correction=bias_correction,
    )
    optimizer.exclude_from_weight_decay(
        var_list=[v for v in variables if is_excluded_from_weight_decay(v)])
    if head_learning_rate is not None:
        optimizer.scale_rate(head_variables, head_learning_rate / learning_rate)
    return optimizer
