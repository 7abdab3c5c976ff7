"""The language the package speaks to a student: explorers, plots, the lab's messages, feedback.

A notebook of the Chinese edition runs ``i18n.set_language("zh-CN")`` in its set-up cell; the English
edition never calls it.  :func:`t` looks a sentence up by its English text (the English is the key,
so code reads as before and a missing translation falls back to English).  Plots use Chinese labels
only when a CJK font is installed (Debian's ``fonts-noto-cjk``): without one, matplotlib would draw
empty boxes, so the figures fall back to English labels (:func:`plot_language`).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import os

ENGLISH = "en"
CHINESE = "zh-CN"
_language = os.environ.get("RLHF_LANGUAGE", ENGLISH)

# Fonts that cover Simplified Chinese, best first (Noto CJK is Debian's fonts-noto-cjk).
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Serif CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "Droid Sans Fallback")

ZH = {
    # explorers: what the student reads before the plot can be drawn
    "Implement {name} above to see this plot.": "先在上方实现 {name}，这里就会画出图。",
    "{name} raised {error}. Fix it above to see this plot.": "{name} 抛出了 {error}。请在上方修正后再看这张图。",
    "(explorer skipped while nbgrader runs this notebook)": "（nbgrader 运行本笔记本时跳过交互图）",
    "A training cell is running in this notebook: slider moves wait, and the plot redraws when it ends":
        "本笔记本中的训练单元格正在运行：拖动滑块后图不会马上变化，要等它运行结束才会重新绘制",
    # PPO explorer
    "trust region [1-eps, 1+eps]": "信任域 [1-eps, 1+eps]",
    "unclipped r * A": "未裁剪的 r * A",
    "your L^CLIP": "你的 L^CLIP",
    "gradient = 0": "梯度 = 0",
    "probability ratio r = pi / pi_old": "概率比 r = pi / pi_old",
    "per-token objective": "每个 token 的目标值",
    "{label} (A = {a:+.2f}, eps = {eps:.2f})": "{label}：A = {a:+.2f}，eps = {eps:.2f}",  # label: "A > 0（好的 token）"
    "A > 0": "A > 0（好的 token）",
    "A < 0": "A < 0（差的 token）",
    "Guide example: reward 10 at the end": "指南中的例子：最后一步奖励 10",
    "A 30-token answer: reward 10 at the end": "30 个 token 的回答：最后一步奖励 10",
    # DPO explorer
    "same loss, {loss:g} nats": "相同损失 {loss:g} nats",
    "Your DPO loss": "你的 DPO 损失",
    "loss -log sigmoid(beta h) (nats)": "损失 -log sigmoid(beta h)（nats）",
    "How hard each pair is pushed": "每个偏好对被推动的力度",
    "gradient weight sigmoid(-beta h)": "梯度权重 sigmoid(-beta h)",
    "Implied reward difference": "偏好边际（隐式奖励之差）",
    "log-ratio margin h (nats)": "对数概率比边际 h（nats）",
    # GAE explorer
    "lambda = 0 (TD residual)": "lambda = 0（TD 误差）",
    "lambda = 1 (return - V)": "lambda = 1（回报 - V）",
    "time step t (token)": "时间步 t（token）",
    "advantage A_t": "优势 A_t",
    "|bias| of A_0": "A_0 的 |偏差|",
    "spread (std) of A_0": "A_0 的离散度（标准差）",
    "your lambda": "你的 lambda",
    "Bias against variance": "偏差与方差的权衡",
    "reward units": "奖励单位",
    # GRPO explorer
    "easy prompt": "简单的提示",
    "uneven prompt": "回答参差的提示",
    "hard prompt": "困难的提示",
    "Your advantages\nG = {g}, {form}": "你的优势\nG = {g}，{form}",
    "scaled by the group std": "除以组内标准差",
    "unscaled (Dr. GRPO)": "不缩放（Dr. GRPO）",
    "reward-model score of the response": "回答的奖励模型得分",
    "advantage": "优势",
    "no baseline": "无基线",
    "your advantages": "你的优势",
    "(G - 1) / G: the unscaled group mean": "(G - 1) / G：不缩放的组均值",
    "group size G": "组大小 G",
    "Noise of one group's gradient estimate": "单组梯度估计的噪声",
    "||std|| / ||mean|| over 2000 groups": "2000 组上的 ||标准差|| / ||均值||",
    "Mean step along the true gradient": "沿真实梯度方向的平均步长",
    "reward noise": "奖励噪声",
    "E[g] . grad J / ||grad J||^2": "E[g] · grad J / ||grad J||^2",
    # the lab: training curves
    "reward-model score (proxy, SFT std units)": "奖励模型得分（代理指标，以 SFT 标准差为单位）",
    "gold reward (truth)": "真实奖励（gold）",
    "Reward rises": "奖励上升",
    "PPO iteration": "PPO 迭代",
    "mean reward per response": "每个回答的平均奖励",
    "KL to the reference policy grows": "与参考策略的 KL 增大",
    "KL(pi || pi_ref) per response (nats)": "每个回答的 KL(pi || pi_ref)（nats）",
    "Policy entropy falls": "策略熵下降",
    "entropy per token (nats)": "每个 token 的熵（nats）",
    "margin (left axis)": "偏好边际（左轴）",
    "Preference margin widens": "偏好边际变大",
    "DPO step": "DPO 步数",
    "beta * (log-ratio chosen - rejected)": "beta *（对数概率比：偏好回复 - 不偏好回复）",
    "accuracy (right axis)": "准确率（右轴）",
    "preference accuracy": "偏好准确率",
    "chosen y_w": "偏好回复 y_w",
    "rejected y_l": "不偏好回复 y_l",
    "Implicit rewards": "隐式奖励",
    "beta * log(pi / pi_ref) (nats)": "beta * log(pi / pi_ref)（nats）",
    "gold reward of samples": "样本的真实奖励",
    "Samples get better, at a KL cost": "样本变好，代价是 KL",
    "mean gold reward": "平均真实奖励",
    "KL to reference": "与参考策略的 KL",
    "KL per response (nats)": "每个回答的 KL（nats）",
    "GRPO iteration": "GRPO 迭代",
    # the lab: why it cannot train yet
    "{name} is not implemented yet: complete it in the notebook first": "{name} 还没有实现：请先在笔记本中完成它",
    "{name} raised {error}": "{name} 抛出了 {error}",
    "{name} must return a torch.Tensor, got {got}": "{name} 必须返回 torch.Tensor，实际返回的是 {got}",
    "{count} functions are not ready: ": "有 {count} 个函数还不能运行：",
    "{name} returned shape {shape}, expected {expected}": "{name} 返回的形状是 {shape}，应为 {expected}",
    "{name} returned NaN or infinite values: {values}": "{name} 返回了 NaN 或无穷大：{values}",
    "{name} returned a tensor with no gradient: use torch operations on its inputs":
        "{name} 返回的张量没有梯度：请对它的输入使用 torch 运算",
    " (at {file}, line {line}: {code})": "（位于 {file} 第 {line} 行：{code}）",
    # the lab's warnings before training (rlhf_course/lab/student.py, ppo_dpo.py)
    "Warning: {warning}": "警告：{warning}",
    "{name} fails on {example}: {error}": "{name} 在{example}上出错：{error}",
    "{name} does not pass its visible test: {example} gives [{got}], expected [{expected}]; "
    "the lab trains with it anyway":
        "{name} 没有通过它的可见测试：{example}给出 [{got}]，应为 [{expected}]；实验仍会用它训练",
    "A = +1 on ratios [0.5, 1, 1.5, 2, 3]": "概率比 [0.5, 1, 1.5, 2, 3]、A = +1 的例子",
    "the visible pair": "可见测试的偏好对",
    "the guide's 5-step episode": "指南中 5 步的回合",
    # the GRPO lab
    "{name} comes from your notebook {pattern} next to this folder, and there is none: fetch that assignment first":
        "{name} 取自本文件夹旁边你的笔记本 {pattern}，但没有找到：请先获取（fetch）那份作业",
    "{name} could not be loaded from your notebook ({errors})": "无法从你的笔记本载入 {name}（{errors}）",
    "GRPO on the tiny LM, stage times (s): ": "在微型语言模型上运行 GRPO，各阶段用时（秒）：",
    "SFT and reward model": "SFT 与奖励模型",
    "reward_model_score": "奖励模型得分",
    "gold_reward": "真实奖励（gold）",
    "kl_to_reference": "与参考策略的 KL",
    "entropy_per_token": "每个 token 的熵",
    "(the lab is skipped while nbgrader runs this notebook: run it yourself in JupyterLab)":
        "（nbgrader 运行本笔记本时跳过实验：请在 JupyterLab 中自己运行）",
    "The lab stopped: {reason}": "实验已停止：{reason}",
    # the machine's training queue (rlhf_course/lab/training_slots.py: a shared hub trains a few labs at a time)
    "Another training of yours holds your place in the queue: this one waits for it to end, then takes its turn":
        "你的另一个训练任务占着你在队列中的位置：本次训练等它结束后再排队",
    "Waiting for a training slot: {ahead} ahead (the machine trains {slots} at a time)":
        "正在等待训练名额：前面还有 {ahead} 个训练任务在等待（本机最多同时运行 {slots} 个）",
    "Got a training slot after {seconds:.0f} s: training now": "等待 {seconds:.0f} 秒后获得训练名额：开始训练",
    "The training queue has not moved for {still:.0f} s (you waited {seconds:.0f} s): training now without a slot":
        "训练队列已有 {still:.0f} 秒没有前进（你共等待了 {seconds:.0f} 秒）：不再等待，不占名额直接开始训练",
    # the labs' command lines (python -m rlhf_course.lab.grpo, python -m rlhf_course.lab.ppo_dpo)
    "GRPO lab stopped: {reason}": "GRPO 实验已停止：{reason}",
    "demo stopped: {reason}": "PPO 与 DPO 实验已停止：{reason}",
    "{path} does not define {names}": "{path} 没有定义 {names}",
    "figure:": "图：",
    "figures:": "图：",
    "GRPO on the tiny LM (no value head)": "在微型语言模型上运行 GRPO（没有价值头）",
    "PPO-RLHF on the tiny LM": "在微型语言模型上运行 PPO-RLHF",
    "DPO on the tiny LM": "在微型语言模型上运行 DPO",
    "; ": "；",  # between the reasons of several functions that cannot run
    # the companion notebook on reward hacking and the reward-KL frontier (rlhf_course/frontier.py): figures
    "exact optimum of gold - β·KL (β from 1000 to 0.001)": "真实奖励 - β·KL 的精确最优解（β 从 1000 到 0.001）",
    "PPO, KL coef {setting:g}": "PPO，KL 系数 {setting:g}",
    "GRPO-R (KL in the reward, unscaled), {setting:g}": "GRPO-R（KL 放在奖励中，不缩放），{setting:g}",
    "GRPO, k3 weight {setting:g}": "GRPO，k3 权重 {setting:g}",
    "DPO, beta {setting:g}": "DPO，beta {setting:g}",
    "PPO as its KL coefficient falls (seed means)": "KL 系数逐渐减小时的 PPO（各种子的均值）",
    "bigram reference (start)": "二元模型参考策略（起点）",
    "SFT transformer (not trained here)": "SFT transformer（此处不训练）",
    "Gold reward against KL to the bigram reference": "真实奖励与 KL（相对于二元模型参考策略）",
    "gold reward of fresh samples": "新样本的真实奖励",
    "Below the exact curve at the run's own KL": "在各次运行自身的 KL 处低于精确曲线多少",
    "exact best gold - run's gold": "精确最优真实奖励 - 该次运行的真实奖励",
    "proxy": "代理指标",
    "gold": "真实奖励",
    "{name}: range over seeds": "{name}：各种子的范围",
    "{name}: mean of {count} seeds": "{name}：{count} 个种子的均值",
    "KL-free PPO, {count} seeds: the proxy holds,\nthe gold reward falls ({falls} below its peak)":
        "无 KL 惩罚的 PPO，{count} 个种子：代理指标维持在高位，\n真实奖励却下降（比峰值低 {falls}）",
    "reward-model score (SFT std units)": "奖励模型得分（以 SFT 标准差为单位）",
    "gold reward": "真实奖励",
    "seed {seed}": "种子 {seed}",
    "fit d(alpha - beta log d), alpha={alpha:.2f}, beta={beta:.2f}": "拟合 d(alpha - beta log d)，alpha={alpha:.2f}，beta={beta:.2f}",
    "Over-optimisation (Gao et al. 2022 form), all seeds": "过度优化（Gao et al. 2022 的函数形式），全部种子",
    "d = sqrt(KL to reference)": "d = sqrt(与参考策略的 KL)",
    "gold reward gain over the reference": "相对参考策略的真实奖励增益",
    # ... and its printed summaries
    "KL-free PPO (seed {seed}), before:": "无 KL 惩罚的 PPO（种子 {seed}），训练前：",
    "KL-free PPO (seed {seed}), after:": "无 KL 惩罚的 PPO（种子 {seed}），训练后：",
    "KL-free PPO, seeds {seeds}: gold peak {peak:.2f} (seeds {peak_min:.2f}-{peak_max:.2f}), end {end:.2f} "
    "({end_min:.2f}-{end_max:.2f}); proxy end {proxy_end:.2f}, {proxy_fall:.2f} at most below its peak":
        "无 KL 惩罚的 PPO，种子 {seeds}：真实奖励峰值 {peak:.2f}（各种子 {peak_min:.2f}-{peak_max:.2f}），最终 {end:.2f}"
        "（{end_min:.2f}-{end_max:.2f}）；代理指标最终 {proxy_end:.2f}，至多比它的峰值低 {proxy_fall:.2f}",
    "bigram reference: exact best gold {best:.2f}, start gold {start:+.3f}; the SFT transformer: gold "
    "{sft:+.3f} at KL {sft_kl:.2f} to the bigram, {sft_gap:+.3f} below the curve":
        "二元模型参考策略：精确最优真实奖励 {best:.2f}，起点的真实奖励 {start:+.3f}；SFT transformer：真实奖励 "
        "{sft:+.3f}，与二元模型的 KL 为 {sft_kl:.2f}，比曲线低 {sft_gap:.3f}",
    "preference pairs (the reward model's training pairs, also DPO's): {count}":
        "偏好对（即奖励模型的训练偏好对，DPO 也用它们）：{count}",
    "setting": "设置",
    "gold (seeds)": "真实奖励（各种子）",
    "KL (seeds)": "KL（各种子）",
    "below the exact curve (seeds)": "低于精确曲线（各种子）",
    "below the exact curve at their own KL (seed means): ": "在各自的 KL 处低于精确曲线（各种子的均值）：",
    ", ": "，",
    # feedback pages and grading messages
    "passed": "通过",
    "passed: {message}": "通过：{message}",
    "failed": "未通过",
    "FAILED": "未通过",
    "trusted grader": "可信评分",
    ". What went wrong: ": "。问题所在：",
    ": not run, ": "：未运行，",
    "Outcome: {state}.": "评分状态：{state}。",
    "(so far)": "（暂计）",
    "{state}; written answers awaiting a person": "{state}；书面回答等待老师评分",
    "Tests: {score:g} / {points:g}.": "测试得分：{score:g} / {points:g}。",
    # the scores' table headings (a test's, then a written answer's)
    "test": "测试",
    "points": "分数",
    "result": "结果",
    "property": "检查的性质",
    "Written answers, graded by a person: {score:g} / {points:g} so far.": "书面回答（由老师评分）：目前 {score:g} / {points:g}。",
    "Written answers, graded by a person: {score:g} / {points:g}.": "书面回答（由老师评分）：{score:g} / {points:g}。",
    "answer": "回答",
    "status": "状态",
    "comment": "评语",
    "graded": "已评分",
    "awaiting a person": "等待老师评分",
    "not answered": "未作答",
    "After the late penalty: {score:g} / {points:g}.": "扣除迟交罚分后：{score:g} / {points:g}。",
    "{count} of {total} tests lost points:": "{total} 个测试中有 {count} 个失分：",
    "your notebook's run:": "你的笔记本运行时的输出：",
    # feedback: above a grade cell grading put back as the release's (feedback.RESTORED_NOTES)
    "{count} cell(s) of your notebook were graded as released, not as your copy has them: a note above each says "
    "why.": "你的笔记本中有 {count} 个单元格是按发布版评分的，而不是按你的副本：这些单元格上方各有一条说明，写明了原因。",
    "Your copy of this cell was changed. It is a locked cell: grading used the release's cell, shown here, instead "
    "of yours.": "你的副本中这个单元格被改动过。它是锁定的单元格：评分时用的是这里显示的发布版单元格，而不是你的版本。",
    "This cell was missing from your notebook (deleted). Grading put back the release's cell, shown here, and used "
    "it.": "你的笔记本中缺少这个单元格（被删除了）。评分时放回并使用了这里显示的发布版单元格。",
    "This cell's nbgrader metadata (its points, or whether it is locked, graded or an answer) was changed in your "
    "copy: it was graded with the release's metadata.":
        "你的副本中这个单元格的 nbgrader 元数据（它的分值，或它是否锁定、是否计分、是否为作答单元格）被改动过：评分时用的是发布版的元数据。",
    "This answer cell was turned into a cell of another type in your copy, so your text in it was not graded: "
    "grading used the release's cell, shown here, instead.":
        "你的副本中这个作答单元格被改成了另一种类型，所以你在其中写的内容没有参与评分：评分时用的是这里显示的发布版单元格。",
    "Feedback: {assignment}": "反馈：{assignment}",
    "{grader}: {verdict} ({score:g} / {points:g})": "{grader}：{verdict}（{score:g} / {points:g}）",
    "The notebook is not shown here: {reason}. Your instructor sees it in the Formgrader.":
        "此处未显示笔记本：{reason}。老师可在 Formgrader 中查看。",
    "rendering was stopped after {seconds:.1f} s": "渲染超过 {seconds:.1f} 秒，已被终止",
    "the page could not be rendered": "页面未能生成",
    # the trusted grader's states and its own sentences (rlhf_course/grading/trusted.py, results.py)
    "failed tests": "部分测试未通过",
    "timed out": "超时",
    "crashed": "进程崩溃",
    "memory limit": "超出内存限制",
    "malformed notebook": "笔记本结构有误",
    "too large": "文件过大",
    "grader error": "评分程序出错",
    "not graded: {state}": "未评分：{state}",
    "the answer cells did not finish running ({state}: {error})": "答案单元格没有运行完（{state}：{error}）",
    "no answer within {seconds:g} s (an infinite loop?)": "{seconds:g} 秒内没有返回结果（是否有死循环？）",
    "{function} timed out": "{function} 超时",
    "the process running {function} sent a reply the grader refuses ({error})":
        "运行 {function} 的进程发回了评分程序拒收的结果（{error}）",
    "{function} broke the grading protocol": "{function} 破坏了评分协议",
    "the process running {function} died ({error})": "运行 {function} 的进程意外终止（{error}）",
    "{function} crashed": "{function} 崩溃了",
    "the answer cells did not finish running ({state})": "答案单元格没有运行完（{state}）",
    "the process running {function} sent a reply the grader refuses": "运行 {function} 的进程发回了评分程序拒收的结果",
    "the process running {function} died": "运行 {function} 的进程意外终止",
    "the grader could not judge this answer; an instructor will look at it": "评分程序无法判定这个答案，老师会亲自查看",
    "{count} call(s) ran out of memory (limit {limit:g} GiB of address space)":
        "有 {count} 次调用超出内存（地址空间上限 {limit:g} GiB）",
    "the grader could not judge this answer ({error}); an instructor will look at it":
        "评分程序无法判定这个答案（{error}），老师会亲自查看",
    "the submission's total time budget of {seconds:g} s ran out": "本次提交的总时间预算 {seconds:g} 秒已用完",
    "the feedback copy of the notebook could not be run to the end ({error})": "反馈用的笔记本副本没能运行到底（{error}）",
    "the feedback copy of the notebook came back unreadable": "反馈用的笔记本副本返回后无法读取",
    # the named misconception under the feedback page's scores (rlhf_course/grading/misconceptions.py)
    "This looks like: {name} - {explanation} (see {section})": "可能的误解：{name}。{explanation}请重读“{section}”一节。",
    # the PPO/DPO lab's summary (rlhf_course/lab/ppo_dpo.py): labels only, the numbers stay as they are
    "tiny LM: {parameters:,} parameters; stage times (s): ": "微型语言模型：{parameters:,} 个参数；各阶段用时（秒）：",
    "sft": "SFT",
    "reward_model": "奖励模型",
    "sft_and_reward_model": "SFT 与奖励模型",
    "reward model": "奖励模型",  # the lab's progress bar
    "ppo": "PPO",
    "dpo_data": "DPO 数据",
    "dpo": "DPO",
    "reward_model_heldout_accuracy": "奖励模型留出集准确率",
    "ppo_reward_model_score": "PPO 奖励模型得分",
    "ppo_gold_reward": "PPO 真实奖励（gold）",
    "ppo_kl_to_reference": "PPO 与参考策略的 KL",
    "ppo_entropy_per_token": "PPO 每个 token 的熵",
    "dpo_implicit_reward_margin": "DPO 偏好边际（beta*h）",
    "dpo_preference_accuracy": "DPO 偏好准确率",
    "dpo_gold_reward": "DPO 真实奖励（gold）",
    "PPO samples before:": "PPO 训练前的样本：",
    "PPO samples after:": "PPO 训练后的样本：",
    "(RM {rm:+.2f}, gold {gold:+.2f})": "（奖励模型 {rm:+.2f}，真实奖励 {gold:+.2f}）",
    "Run the lab above once all three functions pass their visible tests.": "三个函数都通过可见测试后，再运行上面的实验。",
    # the instructor's class report (rlhf_course/grading/pages/class_report.py, templates/class_report/)
    "Class report: {assignment}": "班级报告：{assignment}",
    "Editions: {editions}. Due {due}. Written {written} from the gradebook.":
        "版本：{editions}。截止时间 {due}。本报告于 {written} 根据成绩簿生成。",
    "{submitted} of {roster} submitted; missing: {missing}.": "名单上 {roster} 名学生中 {submitted} 名已提交；未提交：{missing}。",
    "{submitted} of {roster} submitted.": "名单上 {roster} 名学生中 {submitted} 名已提交。",
    "Lowest scores first": "低分在前", "Students by score, lowest first": "学生按成绩排列（低分在前）",
    "Who to see first: the score after the late penalty, lowest first. Each student id opens their submission in the "
    "Formgrader.": "先找谁：按扣除迟交罚分后的成绩排列，低分在前。点击学生编号，即可在 Formgrader 中打开其提交。",
    "In id order.": "按学生编号排列。",
    "(r < -2/sqrt(n), two standard errors below 0: here r < {threshold} for {n} submissions; better students fail it "
    "more often, usually a broken test or an unclear instruction). In red: look at the test.":
        "（r < -2/sqrt(n)，即比 0 低两个标准误；本次共 {n} 份提交，阈值为 r < {threshold}。成绩越好的学生越常未通过，"
        "通常是测试有误或说明不清。）红色：需要检查该测试。",
    ": in grey, for the record.": "：灰色，仅供参考。",
    "Too few submissions to flag: {n}, flags need {min}.": "提交太少，不作标记：{n} 份，至少需要 {min} 份。",
    "Hidden tests (red: to look at; grey: everybody passes)": "隐藏测试（红色：需要检查；灰色：全部通过）",
    "Scores": "成绩", "Manual grading": "人工评分", "Hidden tests": "隐藏测试", "Misconceptions": "误解",
    "Lateness": "迟交", "Students": "学生", "Score distribution": "成绩分布",
    "The score after the late penalty, of {points} points (autograded tests and written answers).":
        "扣除迟交罚分后的成绩，满分 {points} 分（自动评分的测试与书面回答）。",
    "edition": "版本", "students": "学生数", "mean": "平均", "median": "中位数", "sd": "标准差", "min": "最低",
    "max": "最高", "all": "全部",
    "Score distribution, by edition": "成绩分布（按版本）",
    "score after late penalty (of {points})": "扣除迟交罚分后的成绩（满分 {points}）",
    "Manual grading still to do": "尚待人工评分",
    "{n} grade(s) need a person (nbgrader's 'needs manual grade': written answers without a score, and the cells of "
    "submissions that could not be scored). Grade them in the Formgrader.":
        "{n} 项成绩需要人工评定（nbgrader 的“needs manual grade”：尚未打分的书面回答，以及无法评分的提交中的单元格）。"
        "请在 Formgrader 中评分。",
    "{n} submission(s) have no notebook the Formgrader can show (trusted grading could not read them: "
    "grading_report.csv says why), so they cannot be graded by hand: each scored 0 on every test and is flagged, and "
    "its link opens a page saying where the file is. Ask the student to submit again, then collect and run "
    "`sudo make grade`:":
        "{n} 份提交没有 Formgrader 能显示的笔记本（可信评分无法读取它们，原因见 grading_report.csv），因此无法人工评分："
        "每份的所有测试均得 0 分并已标记待查，其链接打开的页面会说明文件所在位置。请让学生重新提交，然后收取并运行"
        " `sudo make grade`：",
    "grade cell": "评分单元格", "to do": "待评", "None: every grade has its score.": "无：每项成绩都已评定。",
    "Pass: full points. Discrimination is the point-biserial correlation r between passing the test (1/0) and the "
    "rest of the student's score (the raw score before the late penalty, minus this test's points), over every "
    "counted submission; it is left out below {min} submissions and when everyone or no one passes.":
        "通过：得到满分。区分度是通过该测试（1/0）与学生其余得分（扣除迟交罚分前的原始分减去本测试的得分）之间的"
        "点二列相关系数 r，按所有计入的提交计算；提交少于 {min} 份、或所有人都通过或都未通过时不计算。",
    "Flags:": "标记：", "nobody passes": "无人通过", "everybody passes": "全部通过", "negative discrimination": "负区分度",
    "pass rate": "通过率",
    "discrimination (point-biserial r)": "区分度（点二列相关 r）", "undefined": "无定义",
    "mean score": "平均得分", "discrimination r": "区分度 r", "flags": "标记",
    "Misconceptions named": "识别出的误解", "misconception": "误解", "function": "函数", "who": "学生",
    "Misconceptions were not named for {n} of {total} submission(s): trusted grading (make grade) names them; stock "
    "nbgrader autograde does not, nor does trusted grading for a submission it could not score or with "
    "c.TrustedGrading.name_misconceptions = False.":
        "{total} 份提交中有 {n} 份未做误解识别：可信评分（make grade）会识别误解；原版 nbgrader autograde 不会，"
        "可信评分对无法评分的提交、或设置了 c.TrustedGrading.name_misconceptions = False 时也不会。",
    "None named: no submission's lost tests match a catalogued mistake exactly.":
        "未识别出任何误解：没有哪份提交的失分测试恰好与目录中的某个错误相符。",
    "Due {due}. {late} submission(s) late (after the due date plus any extension), {penalised} penalised, {extended} "
    "with an extension.":
        "截止时间 {due}。{late} 份提交迟交（晚于截止时间加延期），{penalised} 份被扣分，{extended} 份有延期。",
    "student": "学生", "submitted": "提交时间", "extension": "延期", "deadline": "最终截止", "late by": "迟交时长",
    "+{hours} h": "+{hours} 小时",
    "penalty": "罚分", "Collect: entries not collected and flagged times": "收取：未予收取的条目与有疑问的时间",
    "entry": "条目", "why": "原因", "kernel time": "内核时间", "flag": "标记",
    "None in collect_report.csv.": "collect_report.csv 中没有这类条目。",
    "{n} more entries not collected or flagged times are left out of this page: collect_report.csv lists them all.":
        "另有 {n} 个未予收取的条目或有疑问的时间未在本页列出：collect_report.csv 中列出了全部这些条目和时间。",
    "raw score": "原始分", "score": "成绩", "to grade": "待评", "misconceptions": "误解", "feedback": "反馈",
    "not named": "未做识别", "none": "无", "page": "页面", "nobody": "无人",
    # the checks' fixed sentences (rlhf_course/grading/checks.py) and what they compare
    "{detail} ({note})": "{detail}（{note}）",
    # what the student's function did instead of returning (rlhf_course/grading/sandbox/observe.py, sandbox_runner.py)
    "cell {cell} raised {error}": "单元格 {cell} 抛出了 {error}",
    "it is not defined": "它没有被定义",
    "{name} is not available ({why})": "{name} 无法使用（{why}）",
    "must return a torch.Tensor, got {type}": "必须返回 torch.Tensor，实际得到 {type}",
    "{what} has shape {shape}, expected {expected}": "{what}的形状是 {shape}，应为 {expected}",
    "{what} has dtype {dtype}, expected a floating-point tensor": "{what}的 dtype 是 {dtype}，应为浮点张量",
    "{what} is not finite: {values}": "{what}含有非有限值：{values}",
    "{what} {values}, expected {expected}": "{what}为 {values}，应为 {expected}",
    "the input `{name}` was changed in place": "输入 `{name}` 被原地修改了",
    "the result does not depend on `{name}`": "结果与 `{name}` 无关",
    "the input `{name}` was changed in place, so the cell's next call sees other inputs":
        "输入 `{name}` 被原地修改了，本单元格的下一次调用会看到不同的输入",
    "backward() failed: {error}": "backward() 失败：{error}",
    # what a student reads of a failed hidden test (checks.py): a category, never a value
    "wrong value": "结果不正确",
    "{what}: wrong value on this case": "{what}：在这个用例上的值不正确",
    "{what}: wrong shape on this case": "{what}：在这个用例上的形状不正确",
    "{what}: not a floating-point tensor": "{what}：不是浮点张量",
    "raised NotImplementedError: {function} is not written yet: replace `raise NotImplementedError()` in its answer "
    "cell with your code, run that cell and the visible test under it, then submit again":
        "抛出了 NotImplementedError：{function} 还没有写：把它答案单元格里的 `raise NotImplementedError()` 换成你的代码，"
        "运行那个单元格和它下面的可见测试，然后重新提交",
    "You did not provide a response: write your answer in this cell, in place of what the release put there, then "
    "Validate again.": "你还没有作答：请在这个单元格里写下你的答案，替换发布版原有的内容，然后再运行 Validate。",
    "A function this cell calls is not written yet: it still raises the release's NotImplementedError. Replace "
    "`raise NotImplementedError()` in its answer cell with your code, run that cell, then this one again.":
        "这个单元格调用的函数还没有写：它仍然抛出发布版里的 NotImplementedError。把它答案单元格里的 "
        "`raise NotImplementedError()` 换成你的代码，运行那个单元格，然后再运行这个单元格。",
    "make needs Python {minimum} or later to install the course's pinned requirements.txt, and {python} is Python "
    "{found}. Install a newer Python 3.11 (the course's image and environment.yml use 3.11.7), delete the .venv "
    "folder a failed attempt left, if any, and run make again with it: e.g. make lab PYTHON=/path/to/python3.11":
        "make 需要 Python {minimum} 或更新的版本来安装课程固定版本的 requirements.txt，而 {python} 是 Python {found}。"
        "请安装更新的 Python 3.11（课程的镜像和 environment.yml 用的是 3.11.7），如果之前失败的尝试留下了 .venv 文件夹，"
        "先删除它，然后用新的 Python 再运行 make，例如 make lab PYTHON=/path/to/python3.11",
    "raised NameError: is the function defined, and did its answer cell run without an error?":
        "抛出了 NameError：函数是否已经定义？它的答案单元格是否运行无误？",
    "raised {error}": "抛出了 {error}",
    "raised an exception of a class of its own": "抛出了一个自定义类的异常",
    "a tensor the grader cannot use (not a plain CPU tensor of a real dtype, or too large)":
        "评分程序无法使用的张量（不是实数 dtype 的普通 CPU 张量，或者太大）",
    "a value of another type": "其他类型的值",
    "{what} is not finite": "{what}含有非有限值",
    "backward() failed": "backward() 失败",
    "no gradient reached `{name}` (is the graph detached?)": "梯度没有传到 `{name}`（计算图是否被 detach 了？）",
    # deadlines as a student sees them: nbgrader list, submit, the Assignment List, the feedback page
    # (rlhf_course/exchange/deadlines.py)
    "due {due}": "截止时间 {due}",
    "due {due}, your extension +{hours} h (until {until})": "截止时间 {due}，你的延期 +{hours} 小时（至 {until}）",
    "no due date": "没有截止时间",
    "{hours} h {minutes} min": "{hours} 小时 {minutes} 分钟",
    "{minutes} min": "{minutes} 分钟",
    "on time": "按时提交",
    "late by {late}: the late penalty applies": "迟交 {late}，将扣除迟交罚分",
    "Submitted {assignment} at {when}: {verdict} ({deadline}).": "已提交 {assignment}（{when}）：{verdict}（{deadline}）。",
    "submitted {when}": "提交于 {when}",
    "{notebook} was not submitted: Jupyter cannot read it ({why}). Your earlier submission, if any, is still the one "
    "graded. Restore the notebook's last good state (in JupyterLab: File > Revert Notebook to Checkpoint, or ask for a "
    "fresh copy), save it, and submit again.": "{notebook} 未提交：Jupyter 无法读取它（{why}）。你之前的提交（如果有）"
                                               "仍是被评分的那一份。请把笔记本恢复到上一个完好的状态（在 JupyterLab 中："
                                               "File > Revert Notebook to Checkpoint，或向老师要一份新的副本），保存后再提交。",
    "This replaces your {other} submission of {when} (and any manual grade on it): only the latest submission of "
    "either edition is graded.": "这次提交将取代你在 {when} 提交的 {other}（以及对它的任何人工评分）：两个版本中只有"
                                 "最后一次提交会被评分。",
    # Fetch Feedback with no feedback to fetch (rlhf_course/exchange/fetch.py), the Assignment List's dialog
    "No feedback for {assignment}: you have not submitted it from this account. Feedback comes after you submit, "
    "once your instructor has graded the submission and released its feedback.":
        "{assignment} 没有反馈：你还没有用这个账号提交过它。你提交之后，老师评分并发布反馈，才能获取反馈。",
    "No feedback for {assignment} yet: your instructor releases it after grading; your submission of {when} is "
    "kept.": "{assignment} 还没有反馈：老师评分后才会发布反馈；你在 {when} 的提交已保存。",
    "Fetched the feedback on your {assignment} submission of {fetched} (in {folder}). Your latest submission, of "
    "{latest}, has no feedback yet: your instructor releases it after grading.":
        "已获取你在 {fetched} 提交的 {assignment} 的反馈（在 {folder}）。你最近一次提交（{latest}）还没有反馈："
        "老师评分后才会发布。",
    "Feedback for {assignment}": "{assignment} 的反馈",
    "late by {late} (penalty -{points} points)": "迟交 {late}（扣 {points} 分）",
    "your extension +{hours} h": "你的延期 +{hours} 小时",
    "{parts}: {verdict}": "{parts}：{verdict}",
    # `make lab` (rlhf_course/exchange/local.py) and the Assignment List before anything is released
    "Released to the exchange ({where}): {names}.": "已发布到作业交换目录（{where}）：{names}。",
    "Already in the exchange ({where}): {names}.": "已在作业交换目录中（{where}）：{names}。",
    "Nothing has been released yet: the Assignment List stays empty until an assignment is released "
    "(in the course folder: make release, then nbgrader release_assignment NAME).":
        "还没有发布任何作业：发布作业之前，作业列表（Assignment List）是空的"
        "（在课程目录中运行 make release，再运行 nbgrader release_assignment 作业名）。",
    "Your folder: {folder}. Nbgrader > Assignment List > Fetch puts each assignment there; "
    "Submit sends what you saved there.":
        "你的作业目录：{folder}。Nbgrader > Assignment List > Fetch 会把每份作业放到这里；"
        "Submit 提交的就是你在这里保存的内容。",
    "value": "返回值",
    "advantages": "优势",
    "loss": "损失",
    "objective": "目标值",
    "k3": "k3 估计值",
    # the gradient a check compares (checks.gradients: "d/d" and the argument's name)
    "d/dratio": "对 `ratio` 的梯度",
    "d/dlog_p": "对 `log_p` 的梯度",
    "d/dlog_p_w": "对 `log_p_w` 的梯度",
    "d/dlog_p_l": "对 `log_p_l` 的梯度",
    "d/dref_log_p_w": "对 `ref_log_p_w` 的梯度",
    "d/dref_log_p_l": "对 `ref_log_p_l` 的梯度",
    # Validate on a busy machine (rlhf_course/classroom/patient_validate.py): waits, and real stops
    "The kernel is still starting: the class is busy. Validate is waiting ({wall:.0f} s so far); nothing is wrong with your notebook.":
        "内核仍在启动：全班正在使用这台机器。Validate 正在等待（已等 {wall:.0f} 秒）；你的笔记本没有问题。",
    "Validate is still running cell {cell} ({wall:.0f} s so far, {cpu:.1f} s of it computing): the machine is busy, so it waits; nothing is wrong with your notebook.":
        "Validate 仍在运行第 {cell} 个单元格（已用 {wall:.0f} 秒，其中计算 {cpu:.1f} 秒）：机器很忙，所以它在等待；你的笔记本没有问题。",
    "Validate is still running cell {cell} ({wall:.0f} s so far, {cpu:.1f} s of it computing).":
        "Validate 仍在运行第 {cell} 个单元格（已用 {wall:.0f} 秒，其中计算 {cpu:.1f} 秒）。",
    "Stopped: this cell computed for {cpu:.0f} CPU-seconds without finishing (the limit is {limit:.0f}). An endless loop? A busy machine does not count: only the cell's own computing does.":
        "已停止：这个单元格计算了 {cpu:.0f} CPU 秒仍未结束（上限为 {limit:.0f}）。是死循环吗？机器繁忙不计入，只计这个单元格自己的计算。",
    "Stopped: this cell waited {blocked:.0f} s for something other than the computer (input(), sleep, a lock) without finishing (the limit is {limit:.0f} s).":
        "已停止：这个单元格等待了 {blocked:.0f} 秒仍未结束（上限为 {limit:.0f} 秒）；它等的不是 CPU，而是 input()、sleep 或锁之类。",
    "Validate stopped: the kernel did not start; it waited {blocked:.0f} s for something other than the computer (the limit is {limit:.0f} s).":
        "Validate 已停止：内核没有启动；它等待了 {blocked:.0f} 秒（上限为 {limit:.0f} 秒），等的不是 CPU，而是别的东西。",
    "Validate stopped: the kernel died while starting.": "Validate 已停止：内核在启动时退出了。",
    # nbgrader's Validate dialog in JupyterLab, its title and lines (validate_extension.DIALOG_LINES)
    "Validation Results": "验证结果",
    "Success! Your notebook passes all the tests.": "成功：你的笔记本通过了 Validate 运行的所有测试。",
    "The following cell failed:": "下面这个单元格未通过：",
    # nbgrader's Validator under a failed cell (patient_validate.NBGRADER_SAYS): an answer left as released
    "You did not provide a response.": "你还没有作答。",
    "Partial credit; passed some but not all of the tests": "部分得分：只通过了部分测试",
    # Validate: a grade cell grading will take from the release (patient_validate.RESTORED_CELL, GRADED_AS_RELEASED)
    "Grading will take {count} cell(s) from the release, not from your notebook:":
        "评分时将有 {count} 个单元格采用发布版，而不是你笔记本中的版本：",
    "Grading will take this cell from the release, not from your notebook:": "评分时将采用这个单元格的发布版，而不是你笔记本中的版本：",
    "Grading will take this answer cell's nbgrader metadata from the release; your text in it is graded:":
        "评分时将采用这个作答单元格的发布版 nbgrader 元数据；你在其中写的内容会参与评分：",
    "Cell {position} ({grade_id}), which begins \"{first_line}\", is locked, and your copy of it was changed.":
        "第 {position} 个单元格（{grade_id}），开头是“{first_line}”，是锁定的单元格，而你的副本中它被改动过。",
    "Cell {position} of the release ({grade_id}), which begins \"{first_line}\", is missing from your notebook "
    "(deleted).": "发布版的第 {position} 个单元格（{grade_id}），开头是“{first_line}”，在你的笔记本中缺失（被删除了）。",
    "The nbgrader metadata of cell {position} ({grade_id}), which begins \"{first_line}\", was changed (its points, "
    "or whether it is locked, graded or an answer).":
        "第 {position} 个单元格（{grade_id}），开头是“{first_line}”，它的 nbgrader 元数据被改动过（它的分值，或它是否锁定、"
        "是否计分、是否为作答单元格）。",
    "Cell {position} ({grade_id}), which begins \"{first_line}\", is an answer cell turned into a cell of another "
    "type: your text in it will not be graded.":
        "第 {position} 个单元格（{grade_id}），开头是“{first_line}”，是被改成了另一种类型的作答单元格：你在其中写的内容不会参与评分。",
    "Grading will use the release's version of this cell, not yours. To get it back, copy the released notebook "
    "beside your assignment's folder (in a Terminal: {copy_command}), open {copy_name} in JupyterLab, copy the cell, "
    "and paste it in its place in your notebook.":
        "评分时用的是这个单元格的发布版，而不是你的版本。要找回它，请在终端（Terminal）中输入 {copy_command}，"
        "把发布版笔记本复制到作业文件夹旁边；然后在 JupyterLab 中打开 {copy_name}，复制这个单元格，再粘贴回你笔记本中它原来的位置。",
    "Grading will use the release's version of this cell, not yours. To have your text graded, copy the released "
    "notebook beside your assignment's folder (in a Terminal: {copy_command}), open {copy_name} in JupyterLab, copy "
    "the cell, paste it in its place in your notebook, and move your text into it.":
        "评分时用的是这个单元格的发布版，而不是你的版本。要让你写的内容参与评分，请在终端（Terminal）中输入 {copy_command}，"
        "把发布版笔记本复制到作业文件夹旁边；然后在 JupyterLab 中打开 {copy_name}，复制这个单元格，粘贴回你笔记本中它原来的位置，"
        "再把你写的内容移进去。",
    "Your text in this answer cell is graded, with the release's nbgrader metadata, not yours. To get that back, "
    "copy the released notebook beside your assignment's folder (in a Terminal: {copy_command}), open {copy_name} "
    "in JupyterLab, copy the cell, paste it in its place in your notebook, and move your text into it.":
        "这个作答单元格中你写的内容会参与评分，但用的是发布版的 nbgrader 元数据，而不是你的。要恢复发布版的元数据，"
        "请在终端（Terminal）中输入 {copy_command}，把发布版笔记本复制到作业文件夹旁边；然后在 JupyterLab 中打开 {copy_name}，"
        "复制这个单元格，粘贴回你笔记本中它原来的位置，再把你写的内容移进去。",
    "The class is starting: {ahead} servers ahead of yours. Yours opens by itself; nothing is wrong.":
        "课堂正在启动：你前面还有 {ahead} 个服务器。你的服务器会自动打开；一切正常。",
    "Your server is starting; it opens by itself.": "你的服务器正在启动，会自动打开。",
    "Your server could not start: another account ({accounts}) was listening on its port {port}. "
    "Log in again to start it on another port.":
        "你的服务器无法启动：另一个账号（{accounts}）正在监听它的端口 {port}。请重新登录，在另一个端口上启动它。",
    "Your server stopped while starting. Log in again to start it.": "你的服务器在启动时停止了。请重新登录以启动它。",
    "Validate is waiting for your other Validate to finish.": "Validate 正在等待你的另一个 Validate 结束。",
    "Validate is starting a kernel for {notebook}.": "Validate 正在为 {notebook} 启动内核。",
    "Another Validate of yours holds your place in the class's queue: this one waits for it to end, then takes its turn; nothing is wrong with your notebook.":
        "你的另一个 Validate 占着你在全班队列中的位置：本次 Validate 等它结束后再排队；你的笔记本没有问题。",
    "Validate is waiting its turn: {ahead} ahead of you in the class's queue (the machine validates {slots} at a time); nothing is wrong with your notebook.":
        "Validate 正在排队：全班的队列中你前面还有 {ahead} 个（本机同时最多运行 {slots} 个 Validate）；你的笔记本没有问题。",
    "The kernel is still starting: the class is busy. Your cells run once it is ready; nothing is wrong with your notebook.":
        "内核仍在启动：全班正在使用这台机器。内核就绪后你的单元格就会运行；你的笔记本没有问题。",
}
TABLES = {CHINESE: ZH}


def set_language(language: str) -> None:
    """Speak ``language`` ("en" or "zh-CN") from now on in this process (a notebook's kernel)."""
    global _language
    if language != ENGLISH and language not in TABLES:
        raise ValueError(f"no translation for language {language!r}; known: {ENGLISH}, {', '.join(TABLES)}")
    _language = language


# The language of the submission a grader thread is judging (a grader judges several, of either
# edition, at once: one thread each, so the process-wide language above cannot say it).
_speaking: contextvars.ContextVar[str | None] = contextvars.ContextVar("speaking", default=None)


@contextlib.contextmanager
def speaking(language: str):
    """Within the block, in this thread, :func:`t` speaks ``language`` unless told otherwise."""
    token = _speaking.set(language)
    try:
        yield
    finally:
        _speaking.reset(token)


def language() -> str:
    """The process's language (a notebook's kernel: its edition's); :func:`speaking` does not change it."""
    return _language


def in_effect() -> str:
    """The language :func:`t` speaks here: this thread's (:func:`speaking`), else the process's."""
    return _speaking.get() or _language


def t(english: str, language: str | None = None, **fields) -> str:
    """``english`` in the given language, else the thread's (:func:`speaking`), else the process's,
    with ``fields`` filled in."""
    text = TABLES.get(language or in_effect(), {}).get(english, english)
    return text.format(**fields) if fields else text


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The name of an installed font that covers Simplified Chinese, or None."""
    from matplotlib import font_manager
    installed = {font.name for font in font_manager.fontManager.ttflist}
    if not any(name in installed for name in CJK_FONTS):
        # Installed after matplotlib cached its font list (e.g. apt after the first plot): add them.
        for path in font_manager.findSystemFonts():
            if "CJK" in path or "DroidSansFallback" in path:
                font_manager.fontManager.addfont(path)
        installed = {font.name for font in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def padded(text: str, width: int) -> str:
    """``text`` padded to ``width`` columns as a terminal draws it: a Chinese character takes two."""
    import unicodedata
    columns = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)
    return text + " " * max(width - columns, 0)


def plot_language() -> str:
    """The language figures are labelled in: the student's, if the machine can draw it."""
    if _language == ENGLISH or cjk_font() is None:
        return ENGLISH
    return _language


def plot_text(english: str, **fields) -> str:
    """A figure's label: translated only when a CJK font can draw it (matplotlib then draws text
    with that font first: figures are made after the language is set, so the first label does it)."""
    language = plot_language()
    if language != ENGLISH:
        import matplotlib
        matplotlib.rcParams.update(plot_style())
    return t(english, language, **fields)


def plot_style() -> dict:
    """matplotlib rc settings for the figures (``with matplotlib.rc_context(plot_style()):``): the
    CJK font first, DejaVu Sans behind it for the Latin and math glyphs."""
    if plot_language() == ENGLISH:
        return {}
    return {"font.family": "sans-serif", "font.sans-serif": [cjk_font(), "DejaVu Sans"],
            "axes.unicode_minus": False}
