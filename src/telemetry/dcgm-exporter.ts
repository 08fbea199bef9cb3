/**
 * GPU facts of a remote deployment, read from its DCGM exporter (NVIDIA dcgm-exporter): where no
 * nvidia-smi on this host can see the GPUs, the exporter's Prometheus text names them.
 *
 * The names are dcgm-exporter's default counters (`etc/default-counters.csv`) and the labels its
 * GPU template writes on every series (`internal/pkg/rendermetrics/render_metrics.go`):
 * `gpu` (the index), `UUID` (`uuid` with `--use-old-namespace`), `pci_bus_id`, `device`,
 * `modelName`, `Hostname` (`hostname` after May 2026), MIG's `GPU_I_PROFILE`/`GPU_I_ID`, and the
 * counters of type `label` as labels of their own (`DCGM_FI_DRIVER_VERSION`).
 */
import { sanitizeMessage } from '../errors.ts'
import { httpRequest } from '../http-request.ts'
import type { Manifest } from '../schema/manifest.ts'
import type { GpuFact } from '../schema/telemetry.ts'
import { parseExposition } from './exposition.ts'

/** The framebuffer counters whose sum is the device's memory, MiB (DCGM has no total in its defaults). */
const FB_PARTS = ['DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_FB_RESERVED'] as const
const POWER = 'DCGM_FI_DEV_POWER_USAGE'
/** A label-type counter: the driver version, on every series of the device. */
const DRIVER_LABEL = 'DCGM_FI_DRIVER_VERSION'
/**
 * DCGM's blank sentinels (`DCGM_INT64_BLANK` 0x7ffffffffffffff0 and up, `DCGM_FP64_BLANK` 140737488355328):
 * an exporter that prints one instead of skipping the series reports no value.
 */
const BLANK_AT = 140_737_488_355_328

/** How the facts were derived, as the manifest says it. */
export const DCGM_FACTS_NOTE =
  'memoryTotalMiB = DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED (MiB); ' +
  'driverVersion from the DCGM_FI_DRIVER_VERSION label; powerW = DCGM_FI_DEV_POWER_USAGE when read'

/** One device's series, gathered by UUID. */
interface DeviceSeries {
  index: number | null
  name: string | null
  uuid: string | null
  driver: string | null
  values: Map<string, number>
  /** True when the device is split into MIG instances: each reports its own framebuffer. */
  mig: boolean
}

const finiteValue = (v: number): number | null => (Number.isFinite(v) && Math.abs(v) < BLANK_AT ? v : null)

/**
 * The GPUs a DCGM exporter's `/metrics` text names, by index; `reason` says why there are none
 * (not a DCGM exporter). Memory is the sum of the three framebuffer counters, null where one is
 * missing (exporters before DCGM_FI_DEV_FB_RESERVED) or the GPU is MIG-partitioned; the driver
 * is null where the exporter's counters do not include `DCGM_FI_DRIVER_VERSION`. Pure.
 * @example parseDcgmGpuFacts(text).devices[0] // { index: 0, name: 'NVIDIA L4', driverVersion: '580.105.08', memoryTotalMiB: 23033, … }
 */
export function parseDcgmGpuFacts(text: string): { devices: GpuFact[]; reason: string | null } {
  const byDevice = new Map<string, DeviceSeries>()
  for (const s of parseExposition(text).samples) {
    if (!s.name.startsWith('DCGM_FI_') || s.labels.gpu === undefined) continue
    const uuid = s.labels.UUID ?? s.labels.uuid ?? null
    const key = uuid ?? `gpu ${s.labels.gpu}`
    let device = byDevice.get(key)
    if (device === undefined) {
      const index = /^\d+$/.test(s.labels.gpu) ? Number(s.labels.gpu) : null
      device = { index, name: s.labels.modelName || null, uuid, driver: null, values: new Map(), mig: false }
      byDevice.set(key, device)
    }
    device.driver ??= s.labels[DRIVER_LABEL] || null
    if (s.labels.GPU_I_ID !== undefined) device.mig = true
    const value = finiteValue(s.value)
    if (value !== null && !device.values.has(s.name)) device.values.set(s.name, value)
  }
  if (byDevice.size === 0)
    return { devices: [], reason: 'no DCGM_FI_* series with a gpu label: the URL does not serve a DCGM exporter’s metrics' }
  const devices = [...byDevice.values()].map((d): GpuFact => {
    const parts = FB_PARTS.map((name) => d.values.get(name))
    const memory = d.mig || parts.some((p) => p === undefined) ? null : (parts as number[]).reduce((a, b) => a + b, 0)
    return {
      index: d.index,
      name: d.name,
      uuid: d.uuid,
      driverVersion: d.driver,
      memoryTotalMiB: memory,
      powerW: d.values.get(POWER) ?? null,
    }
  })
  devices.sort((a, b) => (a.index ?? Number.MAX_SAFE_INTEGER) - (b.index ?? Number.MAX_SAFE_INTEGER))
  return { devices, reason: null }
}

/** `url` without user or password, as the manifest may keep it. */
function shownUrl(url: string): string {
  const u = new URL(url)
  u.username = ''
  u.password = ''
  return u.toString()
}

/**
 * Reads a remote deployment's GPU facts from its DCGM exporter at `url` (e.g.
 * `http://10.0.0.5:9400/metrics`): `ok` with `source: 'dcgm-exporter'`, or `unknown` with the
 * reason (unreachable, not an exporter). A user and password in `url` are neither sent nor
 * recorded. Never throws.
 */
export async function queryDcgmGpuFacts(url: string, timeoutMs = 10_000): Promise<Manifest['gpus']> {
  const shown = shownUrl(url)
  let text: string
  try {
    const reply = await httpRequest(url, { timeoutMs })
    if (reply.statusCode !== 200) return { status: 'unknown', reason: `the DCGM exporter at ${shown} answered HTTP ${reply.statusCode}` }
    text = reply.text
  } catch (error) {
    // The code alone where there is one: a message may quote the URL as given, credentials and all.
    const why = (error as NodeJS.ErrnoException).code ?? sanitizeMessage((error as Error).message.replaceAll(url, shown))
    return { status: 'unknown', reason: `the DCGM exporter at ${shown} did not answer (${why})` }
  }
  const { devices, reason } = parseDcgmGpuFacts(text)
  if (reason !== null) return { status: 'unknown', reason: `${shown}: ${reason}` }
  return { status: 'ok', devices, source: 'dcgm-exporter', url: shown, note: DCGM_FACTS_NOTE }
}
