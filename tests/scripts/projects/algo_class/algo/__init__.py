from .ppo import PPO

__all__ = ["PPO"]
