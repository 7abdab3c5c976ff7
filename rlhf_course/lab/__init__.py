"""The tiny-LM RLHF lab: a toy language with a gold reward, a tiny transformer, SFT, a reward
model, and PPO / DPO trainers that run on the student's own functions."""
