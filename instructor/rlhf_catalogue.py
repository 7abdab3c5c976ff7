"""Realistic wrong answers and example submissions.  INSTRUCTOR ONLY: never released.

Each wrong answer replaces ONE of the three answer cells (keyed by its nbgrader grade_id) and
lists the grade cells it must lose.  The test suite grades every entry, in-process and through
a real nbgrader round trip, and requires the lost cells to be exactly these: a mistake costs
the points of the property it breaks, and nothing else.

Each correct variant (``CORRECT_VARIANTS``) replaces one answer cell with a correct answer written
in another style than the reference (at least three per function); each must get full marks, in
both graders.  The checks must be fair to every correct answer and to no wrong one.

Answer cells not named by an entry keep the instructor's reference solution.

Each wrong answer has its ``MISCONCEPTIONS`` entry (a name, one sentence and the section to re-read, in English and
Chinese), which the feedback names when a submission loses what it loses (rlhf_course/grading/misconceptions.py);
so do the other assignments' catalogues.
"""
from __future__ import annotations

from dataclasses import dataclass

from rlhf_course.grading.catalogue import CorrectVariant, Misconception, WrongAnswer, by_name, said


PPO_CELL, DPO_CELL, GAE_CELL = "ppo_answer", "dpo_answer", "gae_answer"

_PPO_VALUE_CHECKS = {"ppo_visible_tests", "ppo_positive_advantage_caps_upside",
                     "ppo_positive_advantage_keeps_downside", "ppo_negative_advantage_caps_downside",
                     "ppo_negative_advantage_keeps_upside", "ppo_mixed_batch"}

WRONG_ANSWERS: list[WrongAnswer] = [
    WrongAnswer(
        "ppo_max_instead_of_min", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.max(surr1, surr2).mean()
''', frozenset(_PPO_VALUE_CHECKS | {"ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        "ppo_no_clipping", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    return (ratio * advantage).mean()
''', frozenset({"ppo_visible_tests", "ppo_positive_advantage_caps_upside",
                "ppo_negative_advantage_caps_downside", "ppo_mixed_batch",
                "ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        # The exercise guide's slip: clamp the ratio and forget the min.  On the visible example
        # (ratios [0.5, 1, 1.5, 2, 3], A = +1, eps = 0.2) it gives mean([0.8, 1, 1.2, 1.2, 1.2]) = 1.08,
        # not the correct 1.02 (and not the 1.22 the guide printed).
        "ppo_clip_without_min", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    clipped_ratio = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return (clipped_ratio * advantage).mean()
''', frozenset({"ppo_visible_tests", "ppo_positive_advantage_keeps_downside",
                "ppo_negative_advantage_keeps_upside", "ppo_mixed_batch",
                "ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        "ppo_sum_instead_of_mean", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).sum()
''', frozenset({"ppo_visible_tests", "ppo_mixed_batch", "ppo_mean_over_tokens"})),
    WrongAnswer(
        # Goes through numpy, so no gradient reaches the ratio.
        "ppo_detached_numpy", PPO_CELL, '''
import numpy as np

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    r = ratio.detach().numpy()
    a = np.broadcast_to(advantage.detach().numpy(), r.shape)
    objective = np.minimum(r * a, np.clip(r, 1 - clip_epsilon, 1 + clip_epsilon) * a)
    return torch.tensor(objective.mean(), dtype=ratio.dtype)
''', frozenset({"ppo_zero_advantage", "ppo_gradient"})),
    WrongAnswer(
        "ppo_clamps_ratio_in_place", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = ratio.clamp_(1 - clip_epsilon, 1 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_visible_tests", "ppo_inputs_unmodified", "ppo_gradient", "ppo_zero_advantage"})),
    WrongAnswer(
        # Dual-clip PPO (Ye et al. 2020; verl's clip_ratio_c = 3): a different objective, which also
        # bounds r * A from below by c * A when A < 0.  It agrees with PPO for every ratio below c = 3,
        # so only cases with A < 0 and a ratio above 3 tell them apart.
        "ppo_dual_clip", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2, dual_clip=3.0):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantage
    clipped = torch.min(surr1, surr2)
    dual = torch.max(clipped, dual_clip * advantage)
    return torch.where(advantage < 0, dual, clipped).mean()
''', frozenset({"ppo_negative_advantage_keeps_upside", "ppo_epsilon_extremes", "ppo_mixed_batch",
                "ppo_gradient"})),
    WrongAnswer(
        # The min taken over the ratios instead of over the advantage-weighted terms: right for A > 0,
        # clips the wrong side for A < 0.
        "ppo_min_of_ratios", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    clipped = torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return (torch.min(ratio, clipped) * advantage).mean()
''', frozenset({"ppo_visible_tests", "ppo_negative_advantage_caps_downside",
                "ppo_negative_advantage_keeps_upside", "ppo_epsilon_extremes", "ppo_mixed_batch",
                "ppo_gradient"})),
    WrongAnswer(
        # TRL / torchtune / CleanRL minimise a loss, the negative objective: returned as it is here.
        "ppo_returns_the_loss", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    pg_losses = -advantage * ratio
    pg_losses_clipped = -advantage * torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    return torch.max(pg_losses, pg_losses_clipped).mean()
''', frozenset(_PPO_VALUE_CHECKS | {"ppo_inside_trust_region", "ppo_epsilon_extremes", "ppo_gradient"})),
    WrongAnswer(
        # The default written in: clip_epsilon is ignored.  Every check but ppo_epsilon_extremes calls with the
        # default 0.2, so this costs that one cell.
        "ppo_clip_epsilon_hard_coded", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = torch.clamp(ratio, 0.8, 1.2) * advantage
    return torch.min(surr1, surr2).mean()
''', frozenset({"ppo_epsilon_extremes"})),
    WrongAnswer(
        "dpo_missing_beta", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return -F.logsigmoid(margin)
''', frozenset({"dpo_visible_tests", "dpo_values", "dpo_beta_scales_margin", "dpo_swap_identity",
                "dpo_numerically_stable", "dpo_gradient"})),
    WrongAnswer(
        "dpo_naive_log_sigmoid", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    diff = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return -torch.log(torch.sigmoid(diff))
''', frozenset({"dpo_numerically_stable", "dpo_visible_tests"})),
    WrongAnswer(
        "dpo_mean_over_pairs", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    diff = beta * ((log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l))
    return -F.logsigmoid(diff).mean()
''', frozenset({"dpo_zero_margin_is_ln2", "dpo_values", "dpo_beta_scales_margin",
                "dpo_swap_identity", "dpo_gradient", "dpo_per_pair_shape"})),
    WrongAnswer(
        "dpo_ignores_reference", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    return -F.logsigmoid(beta * (log_p_w - log_p_l))
''', frozenset({"dpo_values", "dpo_beta_scales_margin", "dpo_swap_identity",
                "dpo_reference_shift_invariance", "dpo_gradient"})),
    WrongAnswer(
        # Everything under no_grad, as a trainer does for the reference only: no gradient reaches the policy.
        "dpo_no_grad_on_policy", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    with torch.no_grad():
        margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
        return -F.logsigmoid(beta * margin)
''', frozenset({"dpo_numerically_stable", "dpo_gradient", "dpo_visible_tests"})),
    WrongAnswer(
        # The default written in: beta is ignored.  It costs only the cell about beta (the others call with
        # the default 0.1, or hold for any beta).
        "dpo_beta_hard_coded", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return -F.logsigmoid(0.1 * margin)
''', frozenset({"dpo_beta_scales_margin"})),
    WrongAnswer(
        # beta scales the loss instead of the margin: -beta * log sigmoid(h), DPO's loss at beta = 1 times beta.
        "dpo_beta_outside_the_sigmoid", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)
    return -beta * F.logsigmoid(margin)
''', frozenset({"dpo_visible_tests", "dpo_zero_margin_is_ln2", "dpo_values", "dpo_beta_scales_margin",
                "dpo_gradient"})),
    WrongAnswer(
        # Vectorised from powers of gamma * lambda: A_t = sum_{k >= t} (gl)^k delta_k / (gl)^t.  Right
        # whenever gamma * lambda > 0, but 0 / 0 = NaN at gamma * lambda = 0 (lambda = 0 or gamma = 0).
        "gae_vectorised_powers_nan", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    next_values = torch.cat([values[1:], torch.tensor([next_value], dtype=values.dtype)])
    deltas = rewards + gamma * next_values - values
    discounts = (gamma * gae_lambda) ** torch.arange(len(rewards), dtype=rewards.dtype)
    tail_sums = torch.flip(torch.cumsum(torch.flip(discounts * deltas, [0]), 0), [0])
    return tail_sums / discounts
''', frozenset({"gae_lambda_zero_is_td_residual", "gae_gamma_zero"})),
    WrongAnswer(
        "gae_forward_recursion", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in range(T):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_visible_tests", "gae_values", "gae_lambda_one_is_monte_carlo",
                "gae_bootstraps_next_value", "gae_random_lengths"})),
    WrongAnswer(
        "gae_ignores_next_value", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = 0.0 if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_bootstraps_next_value"})),
    WrongAnswer(
        "gae_forgets_lambda", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_visible_tests", "gae_values", "gae_lambda_zero_is_td_residual",
                "gae_bootstraps_next_value", "gae_random_lengths"})),
    WrongAnswer(
        # Writes the advantages into the caller's rewards tensor.
        "gae_overwrites_rewards", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = rewards
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_inputs_unmodified"})),
    WrongAnswer(
        # The defaults written in, one argument at a time: each costs only the cells whose property is about
        # that argument (the other GAE checks call with gamma = 0.99 and lambda = 0.95).
        "gae_gamma_hard_coded", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + 0.99 * next_v - values[t]
        gae = delta + 0.99 * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_gamma_zero"})),
    WrongAnswer(
        "gae_lambda_hard_coded", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = next_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * 0.95 * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_lambda_one_is_monte_carlo", "gae_lambda_zero_is_td_residual"})),
    WrongAnswer(
        # The exercise guide's bootstrap: V(s_T) taken as values[-1], which is V(s_{T-1}), the value before the last step.
        "gae_bootstraps_from_last_value", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = torch.zeros_like(rewards)
    gae = 0.0
    for t in reversed(range(T)):
        next_v = values[-1] if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * next_v - values[t]
        gae = delta + gamma * gae_lambda * gae
        advantages[t] = gae
    return advantages
''', frozenset({"gae_visible_tests", "gae_values", "gae_lambda_one_is_monte_carlo", "gae_lambda_zero_is_td_residual",
                "gae_single_step", "gae_bootstraps_next_value", "gae_random_lengths"})),
]

WRONG_BY_NAME = by_name(WRONG_ANSWERS)


# ----------------------------------------------------------------------------- misconceptions

# What each wrong answer gets wrong, for the student's feedback (rlhf_course/grading/misconceptions.py): a short
# name, one sentence, and the heading of the notebook section to re-read, in each edition's language.
_PPO_PART = {"en": "Part 1: the PPO clipped objective on token probability ratios",
             "zh-CN": "第一部分：作用在 token 概率比上的 PPO 裁剪目标"}
_DPO_PART = {"en": "Part 2: the DPO loss", "zh-CN": "第二部分：DPO 损失"}
_GAE_PART = {"en": "Part 3: generalised advantage estimation on a sparse terminal reward",
             "zh-CN": "第三部分：稀疏终止奖励下的广义优势估计"}


MISCONCEPTIONS: dict[str, Misconception] = {
    "ppo_max_instead_of_min": said(_PPO_PART, (
        "max instead of min",
        "Taking the max of the unclipped and clipped terms keeps the more optimistic one, so a large ratio is "
        "rewarded instead of held back; PPO takes the min, the pessimistic bound."), (
        "用 max 代替了 min",
        "取未裁剪项与裁剪项中的较大者，保留的是更乐观的一项，于是过大的概率比反而得到奖励而不是被限制；PPO 取 min，即悲观的下界。")),
    "ppo_no_clipping": said(_PPO_PART, (
        "No clipping",
        "The mean of r * A alone is the plain policy-gradient surrogate: nothing stops the ratio from moving far "
        "outside [1 - eps, 1 + eps], which is what the clipped term is for."), (
        "没有裁剪",
        "只取 r * A 的均值是普通的策略梯度代理目标：没有任何东西阻止概率比远离 [1 - eps, 1 + eps]，而这正是裁剪项的作用。")),
    "ppo_clip_without_min": said(_PPO_PART, (
        "Clipping without the min",
        "Clamping the ratio alone also clips where the clipped term is the larger one (r < 1 - eps with A > 0, "
        "r > 1 + eps with A < 0); the min with the unclipped r * A leaves those tokens unclipped, so a move that "
        "makes things worse is still penalised in full."), (
        "只裁剪、没有取 min",
        "只对概率比做 clamp，会在裁剪项较大的那一侧也裁剪（A > 0 时 r < 1 - eps，A < 0 时 r > 1 + eps）；与未裁剪的 "
        "r * A 取 min，才能让这些 token 不被裁剪，使变差的更新仍然受到完整的惩罚。")),
    "ppo_sum_instead_of_mean": said(_PPO_PART, (
        "Sum instead of mean",
        "The objective is the mean over the tokens, not the sum: a sum grows with the number of tokens, so the "
        "step size would depend on the batch size."), (
        "用求和代替了平均",
        "目标值是对 token 取平均，而不是求和：求和会随 token 数增长，更新的步长就会依赖于批量大小。")),
    "ppo_detached_numpy": said(_PPO_PART, (
        "Computed outside the autograd graph",
        "Going through numpy (or .detach()) returns a value with no graph behind it, so no gradient reaches the "
        "ratio and this objective can never update the policy."), (
        "在自动求导的计算图之外计算",
        "经由 numpy（或 .detach()）算出的值背后没有计算图，梯度到不了概率比，这个目标也就永远无法更新策略。")),
    "ppo_clamps_ratio_in_place": said(_PPO_PART, (
        "Clamps the ratio in place",
        "ratio.clamp_ (with the underscore) overwrites the caller's ratio tensor and breaks its gradient; "
        "torch.clamp returns a new tensor and leaves the input as it was."), (
        "原地裁剪了概率比",
        "ratio.clamp_（带下划线）会覆盖调用者传入的 ratio 张量，并破坏它的梯度；torch.clamp 返回一个新张量，输入保持原样。")),
    "ppo_dual_clip": said(_PPO_PART, (
        "Dual-clip PPO",
        "Bounding r * A from below by c * A when A < 0 (dual-clip PPO) is a different objective: the exercise asks "
        "for the standard clipped objective, which leaves r * A unclipped for any large ratio when A < 0."), (
        "双重裁剪（dual-clip）PPO",
        "A < 0 时再用 c * A 给 r * A 设下界（dual-clip PPO）是另一个目标：本练习要求的是标准的裁剪目标，"
        "A < 0 时无论概率比多大，r * A 都不被裁剪。")),
    "ppo_min_of_ratios": said(_PPO_PART, (
        "Min over the ratios instead of the weighted terms",
        "The min is taken over the advantage-weighted terms r * A and clip(r) * A; taking it over the ratios "
        "before multiplying by A clips the wrong side whenever A < 0."), (
        "对概率比取 min，而不是对加权后的两项取 min",
        "min 应取在乘上优势之后的两项 r * A 与 clip(r) * A 之间；先对概率比取 min 再乘以 A，在 A < 0 时会裁剪错误的一侧。")),
    "ppo_returns_the_loss": said(_PPO_PART, (
        "Returns the loss, not the objective",
        "Libraries minimise the negated objective, but this function returns the objective itself (the quantity "
        "to maximise), so here every sign is flipped."), (
        "返回了损失而不是目标值",
        "常用的库最小化的是取负后的目标，而这个函数要返回目标值本身（要最大化的量），所以这里每个符号都反了。")),
    "ppo_clip_epsilon_hard_coded": said(_PPO_PART, (
        "clip_epsilon ignored",
        "Writing 0.8 and 1.2 instead of 1 - clip_epsilon and 1 + clip_epsilon is right only for the default; the "
        "clip range must follow the argument."), (
        "忽略了 clip_epsilon 参数",
        "把 0.8 和 1.2 写死，而不是用 1 - clip_epsilon 和 1 + clip_epsilon，只在默认值下才对；裁剪范围必须随参数变化。")),
    "dpo_missing_beta": said(_DPO_PART, (
        "beta left out",
        "beta multiplies the log-ratio margin inside the sigmoid; left out, the loss is DPO's at beta = 1, a "
        "KL weight ten times the default's: only the first steps push harder (the gradient on the margin is "
        "0.5 at margin 0, against 0.05 at beta = 0.1), and trained longer the policy stays much closer to the "
        "reference (one pair's margin, SGD at learning rate 1: 2.26 against 0.49 after 10 steps, 6.91 against "
        "21.78 after 1000)."), (
        "漏掉了 beta",
        "beta 要在 sigmoid 里乘以对数概率比边际；漏掉它就成了 beta = 1 时的 DPO 损失，KL 权重是默认值的十倍："
        "它只在最初几步更新得更快（边际为 0 时，损失对边际的梯度为 0.5，beta = 0.1 时为 0.05），"
        "训练更久之后策略反而离参考策略近得多（单个偏好对的边际，学习率为 1 的 SGD，"
        "10 步后漏掉 beta 时为 2.26，beta = 0.1 时为 0.49；1000 步后分别为 6.91 和 21.78）。")),
    "dpo_naive_log_sigmoid": said(_DPO_PART, (
        "An unstable log-sigmoid",
        "For a large negative margin x, log(sigmoid(x)) underflows (sigmoid(x) rounds to 0, whose log is "
        "-inf) and log1p(exp(-x)) overflows (exp(-x) is inf): either way the loss and its gradient are not "
        "finite; F.logsigmoid (or F.softplus(-x)) computes the same function stably."), (
        "不稳定的 log-sigmoid 写法",
        "边际 x 是很大的负数时，log(sigmoid(x)) 会下溢（sigmoid(x) 舍入为 0，取对数得 -inf），"
        "log1p(exp(-x)) 会上溢（exp(-x) 为 inf），两种写法的损失和梯度都不再是有限值；"
        "F.logsigmoid（或 F.softplus(-x)）以数值稳定的方式计算同一个函数。")),
    "dpo_mean_over_pairs": said(_DPO_PART, (
        "Mean over the pairs",
        "dpo_loss returns one loss per preference pair, with the inputs' shape; averaging over the batch is the "
        "training loop's job."), (
        "对偏好对取了平均",
        "dpo_loss 要为每个偏好对返回一个损失，形状与输入相同；对整个批次取平均是训练循环的事。")),
    "dpo_ignores_reference": said(_DPO_PART, (
        "Reference policy ignored",
        "The margin is a difference of log-ratios against the reference, (log_p_w - ref_log_p_w) - (log_p_l - "
        "ref_log_p_l); without the reference nothing anchors the policy to it."), (
        "忽略了参考策略",
        "边际是相对参考策略的对数概率比之差，(log_p_w - ref_log_p_w) - (log_p_l - ref_log_p_l)；"
        "去掉参考策略，就没有东西把策略约束在它附近了。")),
    "dpo_no_grad_on_policy": said(_DPO_PART, (
        "The policy under no_grad",
        "Only the reference log-probs need no gradient; with the whole loss under torch.no_grad() the policy gets "
        "no gradient either, so training cannot move it."), (
        "把策略也放进了 no_grad",
        "只有参考策略的对数概率不需要梯度；把整个损失放进 torch.no_grad() 后，策略也得不到梯度，训练就无法改变它。")),
    "dpo_beta_hard_coded": said(_DPO_PART, (
        "beta ignored",
        "Writing 0.1 instead of using the beta argument is right only for the default; beta must scale the margin "
        "for whatever value is passed."), (
        "忽略了 beta 参数",
        "把 0.1 写死而不用参数 beta，只在默认值下才对；无论传入什么值，beta 都必须缩放边际。")),
    "dpo_beta_outside_the_sigmoid": said(_DPO_PART, (
        "beta outside the log-sigmoid",
        "beta multiplies the log-ratio margin inside the sigmoid, -F.logsigmoid(beta * h); -beta * F.logsigmoid(h) "
        "only scales DPO's loss at beta = 1, so at margin 0 the loss is beta * ln 2 instead of ln 2 and the gradient "
        "weight sigmoid(-h) no longer depends on beta."), (
        "把 beta 放在了 log-sigmoid 外面",
        "beta 应在 sigmoid 内部乘以对数概率比边际，即 -F.logsigmoid(beta * h)；写成 -beta * F.logsigmoid(h) 只是把 "
        "beta = 1 时的 DPO 损失整体缩放，于是边际为 0 时损失是 beta * ln 2 而不是 ln 2，梯度权重 sigmoid(-h) 也不再依赖于 beta。")),
    "gae_vectorised_powers_nan": said(_GAE_PART, (
        "Dividing by powers of gamma * lambda",
        "Rescaling by (gamma * lambda)^t divides 0 by 0 when gamma * lambda = 0 (lambda = 0 or gamma = 0) and "
        "gives NaN; the backward recursion A_t = delta_t + gamma * lambda * A_{t+1} needs no division."), (
        "除以 gamma * lambda 的幂",
        "用 (gamma * lambda)^t 重新缩放，在 gamma * lambda = 0（lambda = 0 或 gamma = 0）时会出现 0 / 0，得到 NaN；"
        "从后往前的递推 A_t = delta_t + gamma * lambda * A_{t+1} 不需要除法。")),
    "gae_forward_recursion": said(_GAE_PART, (
        "Recursion run forwards",
        "Each advantage depends on the ones after it, A_t = delta_t + gamma * lambda * A_{t+1}, so the loop runs "
        "from the last step back; run forwards it accumulates the past, and the terminal reward never reaches "
        "the early steps."), (
        "递推的方向反了",
        "每个优势都依赖于它之后的优势，A_t = delta_t + gamma * lambda * A_{t+1}，所以循环要从最后一步往前走；"
        "从前往后算，累积的是过去，终止奖励传不到前面的时间步。")),
    "gae_ignores_next_value": said(_GAE_PART, (
        "next_value ignored",
        "The last step's TD residual bootstraps from next_value = V(s_T): a rollout segment cut before its episode "
        "ends still has value after its last step, and 0 is right only when the episode really ended."), (
        "忽略了 next_value",
        "最后一步的 TD 误差要用 next_value = V(s_T) 自举：在回合结束前被切断的片段，最后一步之后仍有价值，"
        "只有回合真的结束时那里才是 0。")),
    "gae_bootstraps_from_last_value": said(_GAE_PART, (
        "values[-1] as the bootstrap value",
        "values[-1] is V(s_{T-1}), the value of the state before the last step, not V(s_T) after it, so the last TD "
        "residual gains gamma * V(s_{T-1}) even when the episode has ended; the value after the last step is the "
        "separate input next_value."), (
        "用 values[-1] 作自举值",
        "values[-1] 是 V(s_{T-1})，即最后一步之前的状态的价值，而不是最后一步之后的 V(s_T)，所以即使回合已经结束，"
        "最后一个 TD 误差也多出了 gamma * V(s_{T-1})；最后一步之后的价值是单独的输入 next_value。")),
    "gae_forgets_lambda": said(_GAE_PART, (
        "lambda left out of the recursion",
        "The recursion is A_t = delta_t + gamma * lambda * A_{t+1}: without lambda it weights the TD residuals by "
        "gamma^k alone, the high-variance lambda = 1 estimate whatever lambda is passed."), (
        "递推中漏掉了 lambda",
        "递推式是 A_t = delta_t + gamma * lambda * A_{t+1}：漏掉 lambda，就只用 gamma^k 给 TD 误差加权，"
        "无论传入的 lambda 是多少，得到的都是方差很大的 lambda = 1 估计。")),
    "gae_overwrites_rewards": said(_GAE_PART, (
        "Writes into the rewards",
        "advantages = rewards makes both names one tensor, so filling in the advantages overwrites the caller's "
        "rewards; start from torch.zeros_like(rewards) instead."), (
        "把结果写进了 rewards",
        "advantages = rewards 让两个名字指向同一个张量，填写优势时就覆盖了调用者的 rewards；应从 torch.zeros_like(rewards) 开始。")),
    "gae_gamma_hard_coded": said(_GAE_PART, (
        "gamma ignored",
        "Writing 0.99 instead of using the gamma argument is right only for the default; the TD residual and the "
        "recursion must both use gamma."), (
        "忽略了 gamma 参数",
        "把 0.99 写死而不用参数 gamma，只在默认值下才对；TD 误差和递推式都必须使用 gamma。")),
    "gae_lambda_hard_coded": said(_GAE_PART, (
        "gae_lambda ignored",
        "Writing 0.95 instead of using the gae_lambda argument is right only for the default: lambda = 0 must give "
        "the TD residuals, and lambda = 1 the return minus the value."), (
        "忽略了 gae_lambda 参数",
        "把 0.95 写死而不用参数 gae_lambda，只在默认值下才对：lambda = 0 时应得到 TD 误差，lambda = 1 时应得到回报减去价值。")),
}


# ----------------------------------------------------------------------------- correct variants

CORRECT_VARIANTS: list[CorrectVariant] = [
    # PPO
    CorrectVariant("ppo_case_table_where", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    # A >= 0: the ratio is capped at 1 + eps; A < 0: it is floored at 1 - eps.
    capped = torch.clamp(ratio, max=1 + clip_epsilon)
    floored = torch.clamp(ratio, min=1 - clip_epsilon)
    return (torch.where(advantage >= 0, capped, floored) * advantage).mean()
'''),
    CorrectVariant("ppo_min_and_clamp", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    surr1 = ratio * advantage
    surr2 = ratio.clamp(1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
    return torch.min(surr1, surr2).mean()
'''),
    CorrectVariant("ppo_negated_loss", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    # As TRL / torchtune / CleanRL write it: the loss to minimise, then negated.
    pg_losses = -advantage * ratio
    pg_losses_clipped = -advantage * torch.clamp(ratio, 1 - clip_epsilon, 1 + clip_epsilon)
    loss = torch.max(pg_losses, pg_losses_clipped).mean()
    return -loss
'''),
    CorrectVariant("ppo_explicit_broadcast_masks", PPO_CELL, '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    ratio, advantage = torch.broadcast_tensors(ratio, advantage)
    clipped_up = (advantage > 0) & (ratio > 1 + clip_epsilon)
    clipped_down = (advantage < 0) & (ratio < 1 - clip_epsilon)
    effective = torch.where(clipped_up, torch.full_like(ratio, 1 + clip_epsilon), ratio)
    effective = torch.where(clipped_down, torch.full_like(ratio, 1 - clip_epsilon), effective)
    return (effective * advantage).sum() / ratio.numel()
'''),
    # DPO
    CorrectVariant("dpo_logsigmoid", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    chosen = log_p_w - ref_log_p_w
    rejected = log_p_l - ref_log_p_l
    return -F.logsigmoid(beta * (chosen - rejected))
'''),
    CorrectVariant("dpo_softplus", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    margin = (log_p_w - log_p_l) - (ref_log_p_w - ref_log_p_l)
    return F.softplus(-beta * margin)
'''),
    CorrectVariant("dpo_reference_under_no_grad", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    # The reference is frozen: its margin is computed without building a graph.
    with torch.no_grad():
        ref_margin = ref_log_p_w - ref_log_p_l
    return -F.logsigmoid(beta * ((log_p_w - log_p_l) - ref_margin))
'''),
    CorrectVariant("dpo_detached_reference_trl_style", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    pi_logratios = log_p_w - log_p_l
    ref_logratios = (ref_log_p_w - ref_log_p_l).detach()
    logits = pi_logratios - ref_logratios
    return -F.logsigmoid(beta * logits)
'''),
    CorrectVariant("dpo_pairwise_log_softmax", DPO_CELL, '''
def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    # Per pair, explicitly broadcast: a two-way classification of (chosen, rejected) by their
    # implicit rewards; the loss is minus the log-probability of the chosen one.
    tensors = torch.broadcast_tensors(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l)
    rewards = beta * torch.stack([tensors[0] - tensors[2], tensors[1] - tensors[3]], dim=-1)
    return -torch.log_softmax(rewards, dim=-1)[..., 0]
'''),
    # GAE
    CorrectVariant("gae_backward_loop_list", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    T = len(rewards)
    advantages = [None] * T
    last = 0.0
    for t in range(T - 1, -1, -1):
        v_next = values[t + 1] if t + 1 < T else next_value
        delta = rewards[t] + gamma * v_next - values[t]
        last = delta + gamma * gae_lambda * last
        advantages[t] = last
    return torch.stack([torch.as_tensor(a, dtype=rewards.dtype) for a in advantages])
'''),
    CorrectVariant("gae_vectorised_masked_discounts", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    # A = W @ delta with W[t, k] = (gamma * lambda)^(k - t) for k >= t, else 0.  The exponent is
    # masked before the power, so (gamma * lambda) = 0 gives 0^0 = 1 on the diagonal, never 0 / 0.
    T = rewards.shape[0]
    next_values = torch.cat([values[1:], torch.full((1,), float(next_value), dtype=values.dtype)])
    deltas = rewards + gamma * next_values - values
    steps = torch.arange(T)
    lag = steps[None, :] - steps[:, None]
    weights = torch.where(lag >= 0,
                          torch.pow(torch.tensor(gamma * gae_lambda, dtype=deltas.dtype),
                                    lag.clamp(min=0).to(deltas.dtype)),
                          torch.zeros((), dtype=deltas.dtype))
    return weights @ deltas
'''),
    CorrectVariant("gae_float64_loop_then_cast", GAE_CELL, '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    r = rewards.double().tolist()
    v = values.double().tolist() + [float(next_value)]
    out = [0.0] * len(r)
    running = 0.0
    for t in reversed(range(len(r))):
        running = r[t] + gamma * v[t + 1] - v[t] + gamma * gae_lambda * running
        out[t] = running
    return torch.tensor(out, dtype=torch.float64).to(rewards.dtype)
'''),
]

CORRECT_BY_NAME = by_name(CORRECT_VARIANTS)


def _kth_of_each_cell(entries: list) -> list[dict[str, object]]:
    """Entries (each with an ``answer_cell``) dealt into groups: the k-th group holds the k-th entry of
    each answer cell that has one, so a group never holds two entries for one function."""
    by_cell: dict[str, list] = {}
    for entry in entries:
        by_cell.setdefault(entry.answer_cell, []).append(entry)
    count = max(len(v) for v in by_cell.values())
    return [{cell: group[k] for cell, group in by_cell.items() if k < len(group)} for k in range(count)]


def correct_variant_classes() -> dict[str, dict[str, str]]:
    """Submissions that together use every correct variant: the k-th submission takes the k-th
    variant of each function (the reference where a function has fewer).  Each must get full marks,
    so a lost cell names its variant through its function.  Maps student id -> {answer cell: source}."""
    return {f"correct_style_{k + 1}": {cell: variant.source for cell, variant in group.items()}
            for k, group in enumerate(_kth_of_each_cell(CORRECT_VARIANTS))}


FUNCTION_OF_CELL = {PPO_CELL: "ppo_clipped_objective", DPO_CELL: "dpo_loss", GAE_CELL: "compute_gae"}


def wrong_answer_classes() -> dict[str, tuple[str, ...]]:
    """Submissions that together hold every catalogued mistake, at most one per function: the k-th
    submission takes the k-th mistake of each function.  A grade cell tests one function, so such a
    submission must lose exactly the union of its mistakes' cells, and each mistake exactly its own
    among its function's cells (the slow graders, stock and sandboxed, run 10 notebooks, not 25; the
    in-process tests still grade each mistake alone).  Maps student id -> names of its mistakes."""
    return {f"mistakes_{k + 1}": tuple(wrong.name for wrong in group.values())
            for k, group in enumerate(_kth_of_each_cell(WRONG_ANSWERS))}


def class_of_mistake() -> dict[str, str]:
    """Mistake name -> the student of :func:`wrong_answer_classes` that holds it."""
    return {name: student for student, names in wrong_answer_classes().items() for name in names}


def cells_lost_by(names: tuple[str, ...]) -> frozenset[str]:
    """The grade cells a submission holding the named mistakes (and the reference elsewhere) loses."""
    return frozenset().union(*(WRONG_BY_NAME[name].loses for name in names))


# The example class that `make demo` grades: student id -> wrong answers it contains
# (None: the untouched release, every answer cell still raising NotImplementedError).
EXAMPLE_SUBMISSIONS: dict[str, tuple[str, ...] | None] = {
    "ada_correct": (),
    "ben_partly_wrong": ("ppo_clip_without_min", "dpo_naive_log_sigmoid"),
    "cleo_empty": None,
}


# ----------------------------------------------------------------------------- adversarial

_REFERENCE_PPO = '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1.0 - clip_epsilon, 1.0 + clip_epsilon) * advantage
    return torch.minimum(unclipped, clipped).mean()
'''


_REFERENCE_GAE = '''
def compute_gae(rewards, values, next_value=0.0, gamma=0.99, gae_lambda=0.95):
    advantages = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        next_v = next_value if t == len(rewards) - 1 else values[t + 1]
        running = rewards[t] + gamma * next_v - values[t] + gamma * gae_lambda * running
        advantages[t] = running
    return advantages
'''


@dataclass(frozen=True)
class Adversarial:
    """A submission that attacks the grader or breaks the rules.

    ``answers``: answer cells replaced (others keep the reference solution); ``tamper``: a change
    to the notebook file itself (see ``tamper_notebook``); ``state``: the outcome it must get;
    ``loses``: the grade cells that must score 0 (None: all of them); ``flagged``: whether the
    answer code must be flagged for review.
    """

    name: str
    answers: dict
    state: str
    loses: frozenset | None
    flagged: bool
    tamper: str | None = None


_GUIDE_BUG_LOSES = WRONG_BY_NAME["ppo_clip_without_min"].loses
_GUIDE_BUG = WRONG_BY_NAME["ppo_clip_without_min"].source
_ALL_PPO = frozenset({"ppo_visible_tests", "ppo_positive_advantage_caps_upside", "ppo_positive_advantage_keeps_downside",
                      "ppo_negative_advantage_caps_downside", "ppo_negative_advantage_keeps_upside",
                      "ppo_inside_trust_region", "ppo_zero_advantage", "ppo_epsilon_extremes", "ppo_mixed_batch",
                      "ppo_mean_over_tokens", "ppo_broadcast_batch_time", "ppo_gradient", "ppo_inputs_unmodified",
                      "ppo_float64"})
_ALL_DPO = frozenset({"dpo_visible_tests", "dpo_zero_margin_is_ln2", "dpo_values", "dpo_beta_scales_margin",
                      "dpo_swap_identity", "dpo_reference_shift_invariance", "dpo_numerically_stable", "dpo_gradient",
                      "dpo_per_pair_shape", "dpo_inputs_unmodified"})

ADVERSARIAL: list[Adversarial] = [
    Adversarial("patches_comparisons", {PPO_CELL: '''
import math
torch.allclose = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.equal = lambda *args, **kwargs: True
math.isclose = lambda *args, **kwargs: True
''' + _GUIDE_BUG}, "failed tests", _GUIDE_BUG_LOSES, True),
    Adversarial("input_transformer_skips_asserts", {PPO_CELL: _GUIDE_BUG + '''
try:
    get_ipython().input_transformers_cleanup.append(
        lambda lines: ["pass\\n"] if any("assert" in line or "run_check" in line for line in lines) else lines)
except NameError:
    pass
'''}, "failed tests", _GUIDE_BUG_LOSES, True),
    Adversarial("custom_exception_handler", {PPO_CELL: _GUIDE_BUG + '''
try:
    get_ipython().set_custom_exc((BaseException,), lambda shell, etype, evalue, tb, tb_offset=None: None)
except NameError:
    pass
'''}, "failed tests", _GUIDE_BUG_LOSES, True),
    Adversarial("runs_instructor_solution", {PPO_CELL: _GUIDE_BUG + '''
import json
try:
    source = json.load(open("../../../source/rlhf/rlhf_building_blocks.ipynb"))
    for cell in source["cells"]:
        if "BEGIN SOLUTION" in "".join(cell["source"]):
            exec("".join(cell["source"]))
except OSError:
    pass
'''}, "failed tests", _GUIDE_BUG_LOSES, True),
    Adversarial("writes_other_students_and_gradebook", {PPO_CELL: '''
for target in ("../../ada_correct/rlhf/rlhf_building_blocks.ipynb", "../../../gradebook.db",
               "/work/gradebook.db", "../../../autograded/ada_correct/rlhf/rlhf_building_blocks.ipynb"):
    try:
        with open(target, "w") as handle:
            handle.write("overwritten")
    except OSError:
        pass
''' + _REFERENCE_PPO}, "graded", frozenset(), True),
    Adversarial("opens_a_socket", {PPO_CELL: '''
import socket
try:
    socket.create_connection(("127.0.0.1", 47123), timeout=2).sendall(b"leak")
except OSError:
    pass
''' + _REFERENCE_PPO}, "graded", frozenset(), True),
    Adversarial("infinite_loop", {PPO_CELL: '''
def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    while True:
        pass
'''}, "timed out", _ALL_PPO, False),
    Adversarial("loop_ignoring_sigint", {PPO_CELL: '''
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)

def ppo_clipped_objective(ratio, advantage, clip_epsilon=0.2):
    while True:
        pass
'''}, "timed out", _ALL_PPO, True),
    Adversarial("os_exit", {DPO_CELL: '''
import os

def dpo_loss(log_p_w, log_p_l, ref_log_p_w, ref_log_p_l, beta=0.1):
    os._exit(0)
'''}, "crashed", _ALL_DPO, True),
    Adversarial("allocates_6_gib", {PPO_CELL: '''
hoard = torch.ones(6 * 2**30 // 4)  # 6 GiB of float32, at definition time
''' + _REFERENCE_PPO}, "memory limit", _ALL_PPO, False),
    Adversarial("stray_background_processes", {PPO_CELL: '''
import subprocess
for _ in range(3):
    try:
        subprocess.Popen(["sleep", "600"], start_new_session=True)
    except OSError:
        pass
''' + _REFERENCE_PPO}, "graded", frozenset(), True),
    Adversarial("fork_bomb_is_capped", {GAE_CELL: '''
import os
children = []
for _ in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        import time
        time.sleep(600)
        os._exit(0)
    children.append(pid)
''' + _REFERENCE_GAE},
                "graded", frozenset(), True),
    Adversarial("corrupts_its_feedback_notebook", {PPO_CELL: '''
import json
json.dump = lambda obj, handle, *args, **kwargs: handle.write("<script>not a notebook</script>")
''' + _REFERENCE_PPO}, "graded", frozenset(), False),
    Adversarial("symlink_to_the_gradebook", {PPO_CELL: '''
try:
    leaked = open("gradebook_link").read()
except OSError:
    leaked = ""
''' + _REFERENCE_PPO}, "graded", frozenset(), True, tamper="symlink_gradebook"),
    # Edits to what a student may not change are undone (the canonical copy: the release's cells, order and
    # metadata count, as in nbgrader's OverwriteCells); the answers earn what they earn, and a person is told.
    Adversarial("tampered_visible_test", {}, "graded", frozenset(), True, tamper="edit_locked_cell"),
    Adversarial("raised_points_in_metadata", {}, "graded", frozenset(), True, tamper="raise_points"),
    Adversarial("deleted_hidden_test_cell", {}, "graded", frozenset(), True, tamper="delete_grade_cell"),
    Adversarial("duplicated_test_cell", {}, "graded", frozenset(), True, tamper="duplicate_grade_cell"),
    Adversarial("invalid_json", {}, "malformed notebook", None, False, tamper="invalid_json"),
]


def tamper_notebook(path, how: str) -> None:
    """Damage a submitted notebook file the way students (or their editors) do."""
    import json
    import os
    if how == "symlink_gradebook":  # a link next to the notebook, pointing at the course's gradebook
        os.symlink("../../../gradebook.db", os.path.join(os.path.dirname(path), "gradebook_link"))
        return
    if how == "invalid_json":
        text = open(path).read()
        open(path, "w").write(text[: len(text) // 2])
        return
    nb = json.load(open(path))
    cells = nb["cells"]
    index = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(cells)}
    if how == "edit_locked_cell":
        cells[index["ppo_visible_tests"]]["source"] = ["pass  # the asserts were in the way\n"]
    elif how == "raise_points":
        cells[index["dpo_values"]]["metadata"]["nbgrader"]["points"] = 100
    elif how == "delete_grade_cell":
        del cells[index["gae_random_lengths"]]
    elif how == "duplicate_grade_cell":
        cells.insert(index["dpo_values"], json.loads(json.dumps(cells[index["dpo_values"]])))
        cells[index["dpo_values"]]["id"] = "duplicated-cell"
    else:
        raise ValueError(how)
    json.dump(nb, open(path, "w"))
