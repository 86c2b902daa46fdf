-- Argo CD health of a dirigent.dev object (Pipeline, Schedule, Webhook, Connection).
-- Argo CD runs this under Lua 5.1 with the live object in `obj` and reads `hs`.
--   Progressing: the operator has not yet seen this generation, or Ready is Unknown.
--   Suspended:   a paused Schedule or a disabled Webhook (they are fine, just off).
--   Healthy:     Ready=True for the current generation.
--   Degraded:    Ready=False (invalid manifest, missing pipeline, failing connection),
--                with the operator's reason and message.
-- A failed run does not make a Pipeline Degraded: the resource is fine, the run is not.
local hs = {}
local status = obj.status
local generation = obj.metadata and obj.metadata.generation

if status == nil or status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the dirigent operator to reconcile"
  return hs
end
if generation ~= nil and (status.observedGeneration == nil or status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to reconcile generation " .. tostring(generation)
  return hs
end

local ready = nil
for _, condition in ipairs(status.conditions) do
  if condition.type == "Ready" then
    ready = condition
  end
end
if ready == nil or ready.status == "Unknown" then
  hs.status = "Progressing"
  hs.message = (ready and ready.message) or "Waiting for the Ready condition"
  return hs
end

local spec = obj.spec or {}
if ready.status == "True" then
  if obj.kind == "Schedule" and spec.paused == true then
    hs.status = "Suspended"
    hs.message = "Schedule is paused"
  elseif obj.kind == "Webhook" and spec.enabled == false then
    hs.status = "Suspended"
    hs.message = "Webhook is disabled"
  else
    hs.status = "Healthy"
    hs.message = ready.message or "Ready"
  end
  return hs
end

hs.status = "Degraded"
local reason = ready.reason or "NotReady"
if ready.message ~= nil and ready.message ~= "" then
  hs.message = reason .. ": " .. ready.message
else
  hs.message = reason
end
return hs
