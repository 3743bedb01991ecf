"""Node-level samplers (NVML, simulated GPUs, host, kernel log) that the agent schedules."""
