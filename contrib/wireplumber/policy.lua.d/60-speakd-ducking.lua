-- speakd: loads ../scripts/speakd-ducking.lua into WirePlumber 0.4's policy.
-- Roles as pipewire-pulse names them, compared without case; level is linear (0.2 is -14 dB).
load_script("speakd-ducking.lua", {
  ["trigger-roles"] = { "announcement" },
  ["ducking-roles"] = { "music", "movie", "game" },
  ["level"] = 0.2,
})
