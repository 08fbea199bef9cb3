import type { GpuFactsProbe } from '../engines/launch.ts'
import { queryGpuFacts } from '../telemetry/nvidia-smi.ts'

/**
 * GPU facts for a manifest from `nvidia-smi`, limited to the engine's visible devices; absent
 * (with nvidia-smi's own reason) on a machine without a driver. `executable` lets tests and
 * unusual installs point at another binary.
 */
export function nvidiaSmiGpuFacts(executable?: string): GpuFactsProbe {
  return async (visibleDevices) => {
    const result = await queryGpuFacts({ executable, visibleDevices })
    return result.status === 'ok' ? { status: 'ok', devices: result.gpus } : { status: 'absent', reason: result.reason }
  }
}
