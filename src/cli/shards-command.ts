import { readFile, rename } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ServegateError } from '../errors.ts'
import { killTreeSync } from '../engines/process-tree.ts'
import { isLoopbackHost } from '../loopback.ts'
import { writeRunRecord } from '../record/record-writer.ts'
import { mergeShards } from '../runner/shard-merge.ts'
import { type CellShard, type ShardStreams, shardConcurrency } from '../runner/shard-split.ts'
import type { RunRecord } from '../schema/run.ts'
import type { ShardFigures } from '../schema/shards.ts'
import type { CliIo } from './cli-io.ts'
import { intFlag } from './flags.ts'
import { interruption } from './interrupt.ts'
import { kubernetesJobCommand } from './kubernetes-job.ts'
import { ShardCoordinator, ShardMember } from './shard-link.ts'
import { mergedRecordPath, recordLogLines, reportMerged } from './merged-record.ts'

/** The flags of a cell measured by several client processes. */
export const SHARD_FLAGS = {
  shards: { type: 'string' },
  'shard-index': { type: 'string' },
  coordinator: { type: 'string' },
  'kubernetes-job': { type: 'string' },
  'kubernetes-image': { type: 'string' },
  'kubernetes-namespace': { type: 'string' },
  'kubernetes-wait-s': { type: 'string' },
  'kubernetes-api-key-secret': { type: 'string' },
  'print-manifest': { type: 'boolean' },
} as const

export const SHARD_HELP = `
one cell from several client processes (docs/cli.md, "Shards: one cell from several client processes"):
  --shards N                measure with N client processes, one shard each (locally, or with --kubernetes-job as pods),
                            sharing one open-loop schedule (shard i sends the requests whose index is i mod N) or one
                            closed-loop concurrency (split as evenly as it goes); one merged record, each shard's
                            client health in its "shards"; every shard's own record beside it (<out>.shard-<i>.json)
  --coordinator HOST:PORT   a shard's coordinator (set by --shards and --kubernetes-job); a host off loopback needs --remote
  --shard-index I           this process's shard (set by --shards; on Kubernetes read from JOB_COMPLETION_INDEX)
  --kubernetes-job NAME     with --shards: run the shards as an Indexed Job NAME (kubectl apply, wait, logs, delete);
                            needs --kubernetes-image and --remote (docs/cli.md, "Shards on Kubernetes")
  --kubernetes-image IMAGE  the container image the pods run servegate from (servegate on its PATH)
  --kubernetes-namespace NS the Job's namespace, default default
  --kubernetes-wait-s S     how long kubectl waits for the Job to complete, default 3600
  --kubernetes-api-key-secret SECRET  with --api-key-env NAME: the Secret whose key NAME the pods read the API key from
  --print-manifest          with --kubernetes-job: print the Job and Service YAML and exit, applying nothing`

/** The largest shard count: far more client processes than a cell needs. */
const MAX_SHARDS = 256

/** Parsed values of the flags this module reads (the rest of `servegate run`'s pass through). */
type ShardFlagValues = Partial<Record<keyof typeof SHARD_FLAGS, string | boolean>> & {
  remote?: boolean | undefined
  engine?: string | undefined
  'max-in-flight'?: string | undefined
  cancel?: string | undefined
  workload?: string | undefined
  sessions?: string | undefined
  rate?: string | undefined
  trace?: string | undefined
  concurrency?: string | undefined
  'api-key-env'?: string | undefined
  out?: string | undefined
}

/** How this process takes part in a sharded cell. */
export type ShardRole =
  | { kind: 'local'; shards: number }
  | {
      kind: 'kubernetes'
      shards: number
      job: string
      image: string
      namespace: string
      waitS: number
      printOnly: boolean
      /** `--api-key-env NAME`'s variable in each pod, from this Secret's key NAME; null without an API key. */
      apiKey: { env: string; secret: string } | null
    }
  | { kind: 'member'; shards: number; index: number; host: string; port: number; coordinates: boolean }

/** `HOST:PORT` (`[v6]:PORT` too), its host off loopback only with `--remote`. */
function coordinatorAddress(value: string, remote: boolean): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(value)
  const host = match?.[1] ?? match?.[2]
  const port = Number(match?.[3])
  if (host === undefined || !(port >= 1 && port <= 65_535))
    throw new ServegateError('CONFIG_INVALID', `--coordinator: "${value}" is not HOST:PORT; pass e.g. --coordinator 127.0.0.1:7470`)
  if (!remote && !isLoopbackHost(host))
    throw new ServegateError(
      'CONFIG_INVALID',
      `--coordinator: ${host} is not a loopback address; a coordinator on another host is reached only on purpose: pass --remote`,
    )
  return { host, port }
}

/** Flags that cannot be split over shards, each with why. */
function refuseUnshardable(values: ShardFlagValues, shards: number): void {
  const why: Array<[boolean, string]> = [
    [values.engine !== undefined, '--engine: each shard would launch its own engine; start it once and pass its --base-url'],
    [
      values['max-in-flight'] !== undefined,
      '--max-in-flight: a cap on requests in flight holds in one process, not across shards; drop it',
    ],
    [values.cancel !== undefined, "--cancel: each shard's check that the engine drained would see the other shards' requests; drop it"],
    [
      values.workload === 'conversation' || values.sessions !== undefined,
      '--workload conversation: a turn waits for the one before it, in another shard; measure it in one process',
    ],
  ]
  const closed = values.rate === undefined && values.trace === undefined
  const concurrency = Number(values.concurrency ?? 1)
  if (closed && concurrency < shards)
    why.push([true, `a closed loop at concurrency ${concurrency} leaves a shard without a slot; pass --concurrency ${shards} or more`])
  const found = why.find(([given]) => given)
  if (found !== undefined) throw new ServegateError('CONFIG_INVALID', `--shards: ${found[1]}`)
}

/**
 * The part this process plays, from its flags: null without `--shards`; the local coordinator
 * (`--shards N`), the Kubernetes launcher (`--kubernetes-job`), or a shard (`--shard-index`, or
 * `--coordinator` on Kubernetes, where the index is JOB_COMPLETION_INDEX and pod 0 coordinates).
 * @throws ServegateError CONFIG_INVALID naming the flag and the fix
 */
export function shardRole(values: ShardFlagValues, env: NodeJS.ProcessEnv = process.env): ShardRole | null {
  const str = (key: keyof typeof SHARD_FLAGS): string | undefined => values[key] as string | undefined
  if (values.shards === undefined) {
    const stray = (Object.keys(SHARD_FLAGS) as Array<keyof typeof SHARD_FLAGS>).find((key) => values[key] !== undefined)
    if (stray !== undefined) throw new ServegateError('CONFIG_INVALID', `--${stray} needs --shards N`)
    return null
  }
  const shards = intFlag('--shards', str('shards'), 1, MAX_SHARDS) as number
  refuseUnshardable(values, shards)
  const job = str('kubernetes-job')
  if (job !== undefined) return kubernetesRole(values, shards, job)
  const kubeOnly = (
    ['kubernetes-image', 'kubernetes-namespace', 'kubernetes-wait-s', 'kubernetes-api-key-secret', 'print-manifest'] as const
  ).find((k) => values[k] !== undefined)
  if (kubeOnly !== undefined) throw new ServegateError('CONFIG_INVALID', `--${kubeOnly} needs --kubernetes-job NAME`)
  const coordinator = str('coordinator')
  if (coordinator === undefined) {
    if (values['shard-index'] !== undefined) throw new ServegateError('CONFIG_INVALID', '--shard-index needs --coordinator HOST:PORT')
    return { kind: 'local', shards }
  }
  const { host, port } = coordinatorAddress(coordinator, values.remote === true)
  const given = str('shard-index')
  const fromJob = given === undefined
  const raw = given ?? env.JOB_COMPLETION_INDEX
  if (raw === undefined)
    throw new ServegateError(
      'CONFIG_INVALID',
      '--coordinator: pass --shard-index I (on Kubernetes, an Indexed Job sets JOB_COMPLETION_INDEX)',
    )
  const index = intFlag(fromJob ? 'JOB_COMPLETION_INDEX' : '--shard-index', raw, 0, shards - 1) as number
  return { kind: 'member', shards, index, host, port, coordinates: fromJob && index === 0 }
}

function kubernetesRole(values: ShardFlagValues, shards: number, job: string): ShardRole {
  if (!/^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$/.test(job))
    throw new ServegateError('CONFIG_INVALID', `--kubernetes-job: "${job}" is not a DNS label of at most 52 characters (a-z, 0-9, -)`)
  const image = values['kubernetes-image'] as string | undefined
  if (image === undefined)
    throw new ServegateError('CONFIG_INVALID', '--kubernetes-job needs --kubernetes-image IMAGE (servegate on its PATH)')
  if (values.remote !== true)
    throw new ServegateError(
      'CONFIG_INVALID',
      '--kubernetes-job: the pods reach their coordinator and the target off loopback; pass --remote to say so on purpose',
    )
  const stray = (['coordinator', 'shard-index'] as const).find((k) => values[k] !== undefined)
  if (stray !== undefined) throw new ServegateError('CONFIG_INVALID', `--${stray}: --kubernetes-job sets it for each pod; drop it`)
  const namespace = (values['kubernetes-namespace'] as string | undefined) ?? 'default'
  const waitS = intFlag('--kubernetes-wait-s', values['kubernetes-wait-s'] as string | undefined, 1, 7 * 86_400) ?? 3600
  return {
    kind: 'kubernetes',
    shards,
    job,
    image,
    namespace,
    waitS,
    printOnly: values['print-manifest'] === true,
    apiKey: apiKeyOf(values),
  }
}

/** Where the pods read `--api-key-env NAME` from: a Secret's key NAME, which servegate never reads itself. */
function apiKeyOf(values: ShardFlagValues): { env: string; secret: string } | null {
  const env = values['api-key-env']
  const secret = values['kubernetes-api-key-secret'] as string | undefined
  if (env === undefined && secret === undefined) return null
  if (env === undefined)
    throw new ServegateError('CONFIG_INVALID', '--kubernetes-api-key-secret needs --api-key-env NAME (the key it holds)')
  if (secret === undefined)
    throw new ServegateError(
      'CONFIG_INVALID',
      `--api-key-env ${env}: the pods need it too; pass --kubernetes-api-key-secret SECRET, a Secret whose key ${env} holds the API key ` +
        `(kubectl create secret generic SECRET --from-literal=${env}=…)`,
    )
  return { env, secret }
}

/** A shard's own record beside the merged one: `<out minus .json>.shard-<i>.json`. */
function shardRecordPath(out: string, index: number): string {
  return `${out.replace(/\.json$/, '')}.shard-${index}.json`
}

/**
 * The `servegate run` argv a shard (a local process or a pod) gets from its launcher: every flag
 * given but the launcher's own (`--out`, `--json`, the Kubernetes ones), then `extra`.
 */
function memberArgv(values: Record<string, string | boolean | undefined>, extra: readonly string[]): string[] {
  const launcherOnly = new Set([
    'out',
    'json',
    'help',
    'kubernetes-job',
    'kubernetes-image',
    'kubernetes-namespace',
    'kubernetes-wait-s',
    'kubernetes-api-key-secret',
    'print-manifest',
  ])
  const argv: string[] = ['run']
  for (const [key, value] of Object.entries(values)) {
    if (launcherOnly.has(key) || value === undefined || value === false) continue
    argv.push(value === true ? `--${key}` : `--${key}=${value}`)
  }
  return [...argv, ...extra]
}

/** A shard's session: its link to the coordinator (and, in Kubernetes pod 0, the coordinator itself). */
export class ShardSession {
  readonly role: Extract<ShardRole, { kind: 'member' }>
  readonly #member: ShardMember
  readonly #coordinator: ShardCoordinator | null
  #streams: ShardStreams = { request: [], wire: [] }

  private constructor(role: Extract<ShardRole, { kind: 'member' }>, member: ShardMember, coordinator: ShardCoordinator | null) {
    this.role = role
    this.#member = member
    this.#coordinator = coordinator
  }

  /** Joins the coordinator; pod 0 on Kubernetes first starts it (listening on every interface, or on loopback for a loopback host). */
  static async open(role: Extract<ShardRole, { kind: 'member' }>, signal?: AbortSignal): Promise<ShardSession> {
    const coordinator = role.coordinates
      ? await ShardCoordinator.listen(role.shards, isLoopbackHost(role.host) ? role.host : '0.0.0.0', role.port)
      : null
    const member = await ShardMember.join(role.index, coordinator === null ? role.host : '127.0.0.1', role.port, signal).catch(
      async (error: unknown) => {
        await coordinator?.close()
        throw error
      },
    )
    return new ShardSession(role, member, coordinator)
  }

  /** The cell's shard hook: this shard's part of the plan, the barrier, and what it sent. */
  cellShard(): CellShard {
    return {
      index: this.role.index,
      count: this.role.shards,
      barrier: () => this.#member.barrier(),
      onStreams: (streams) => (this.#streams = streams),
    }
  }

  /** This shard's record as it is kept: its figures in `shards`, and no stream hash of its part of the plan. */
  withFigures(record: RunRecord): RunRecord {
    const { harness, plan } = record
    const figures: ShardFigures = {
      index: this.role.index,
      host: this.#member.host,
      ...this.#member.clock,
      requests: record.completed + (record.failed ?? 0) + record.cancelled,
      concurrency: plan.arrival === null ? shardConcurrency(plan.concurrency, this.role.shards, this.role.index) : null,
      sendLagP99Ms: harness.sendLagP99Ms,
      clientCpuShare: harness.clientCpuShare,
      harnessLimited: harness.harnessLimited,
      reasons: harness.reasons,
    }
    // A shard sent part of the stream: its record holds no stream hash (the merged record has the whole plan's).
    const workload = { ...plan.workload, requestStreamSha256: null, wireStreamSha256: null, wireMatchesPlan: null }
    return { ...record, plan: { ...plan, workload }, shards: [figures] }
  }

  /**
   * Hands the shard record written at `path` to the coordinator; the coordinating pod then waits
   * for every shard and returns the merged record (null for any other shard).
   */
  async hand(record: RunRecord, path: string): Promise<RunRecord | null> {
    const figures = (record.shards ?? [])[0] as ShardFigures
    await this.#member.hand(figures, this.#streams, await readFile(path, 'utf8'))
    this.#member.close()
    if (this.#coordinator === null) return null
    try {
      return mergeShards(await this.#coordinator.results())
    } finally {
      await this.#coordinator.close()
    }
  }

  /** Leaves the run; after an error, tells the coordinator why first (its message names this shard and the error). */
  async close(error?: unknown): Promise<void> {
    if (error === undefined) this.#member.close()
    else this.#member.fail(error instanceof Error ? error.message : String(error))
    await this.#coordinator?.close()
  }
}

/** How long stopped shards get to write their partial records before they are killed, ms. */
const STOP_GRACE_MS = 15_000

/** bin/servegate.js of this installation: the CLI a launcher starts its shards with. */
const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))

/** The last lines of a shard's output, for the error that names it. */
function tail(text: string, lines = 5): string {
  return text.trimEnd().split('\n').slice(-lines).join('\n')
}

/**
 * `servegate run --shards N` on this machine: the coordinator listens on loopback, starts N
 * `servegate run` processes (each its own process group, torn down whole), merges their records
 * and writes the merged record to `out`; each shard's own record lies beside it.
 * @returns the merged record, or throws naming the shard that failed
 */
async function runLocalShards(
  shards: number,
  values: Record<string, string | boolean | undefined>,
  out: string,
  io: CliIo,
  signal?: AbortSignal,
): Promise<RunRecord> {
  const { execa } = await import('execa')
  const coordinator = await ShardCoordinator.listen(shards, '127.0.0.1', 0)
  // Shards that ended: a process group is signalled only while its leader has not been reaped.
  const exited = new Set<number>()
  const children = Array.from({ length: shards }, (_, i) => {
    const argv = memberArgv(values, [
      `--shard-index=${i}`,
      `--coordinator=127.0.0.1:${coordinator.port}`,
      `--out=${shardRecordPath(out, i)}`,
    ])
    const child = execa(process.execPath, [BIN, ...argv], { reject: false, stdin: 'ignore', all: true, detached: true, cleanup: true })
    void child.then((result) => {
      exited.add(i)
      if (result.exitCode !== 0)
        coordinator.abort(`shard ${i} exited with code ${result.exitCode ?? result.signal}: ${tail(result.all ?? '')}`)
    })
    return child
  })
  const signalAll = (name: NodeJS.Signals): void =>
    children.forEach((child, i) => {
      if (child.pid !== undefined && !exited.has(i)) killTreeSync(child.pid, name)
    })
  const stop = (): void => {
    signalAll('SIGTERM')
    coordinator.abort('interrupted')
  }
  signal?.addEventListener('abort', stop, { once: true })
  io.stderr.write(`servegate: ${shards} shards started (coordinator 127.0.0.1:${coordinator.port})\n`)
  try {
    const merged = mergeShards(await coordinator.results())
    await Promise.all(children)
    return merged
  } catch (error) {
    // The others are stopped as Ctrl-C stops one run: each writes its partial record, or is killed after a grace period.
    signalAll('SIGTERM')
    const grace = new Promise((resolve) => setTimeout(resolve, STOP_GRACE_MS).unref())
    await Promise.race([Promise.all(children), grace])
    signalAll('SIGKILL')
    await Promise.all(children)
    throw error
  } finally {
    signal?.removeEventListener('abort', stop)
    await coordinator.close()
  }
}

/** Writes a merged record to `out` (default servegate-runs/<run id>.json), moving shard records written beside a provisional name. */
async function writeMerged(record: RunRecord, out: string | undefined, provisional: string, shards: number): Promise<string> {
  const path = resolve(out ?? join('servegate-runs', `${record.runId}.json`))
  await writeRunRecord(path, record)
  if (path !== provisional)
    for (let i = 0; i < shards; i++) await rename(shardRecordPath(provisional, i), shardRecordPath(path, i)).catch(() => {})
  return path
}

/** The provisional merged path a launcher names its shards' records after, before the run id is known. */
function provisionalOut(out: string | undefined): string {
  return resolve(out ?? join('servegate-runs', `in-progress-${process.pid}.json`))
}

/**
 * `servegate run --shards N` as the launcher: N local processes, or an Indexed Job of N pods;
 * the merged record written to `--out` and reported as `run` reports one.
 */
export async function launchShards(
  role: Exclude<ShardRole, { kind: 'member' }>,
  values: Record<string, string | boolean | undefined>,
  io: CliIo,
  signal?: AbortSignal,
): Promise<number> {
  if (role.kind === 'kubernetes') return kubernetesJobCommand(role, memberArgv(values, []), values, io, signal)
  const out = values.out as string | undefined
  const provisional = provisionalOut(out)
  let merged: RunRecord
  try {
    merged = await runLocalShards(role.shards, values, provisional, io, signal)
  } catch (error) {
    // Ctrl-C or a signal stopped every shard: each wrote its partial record beside --out.
    if (signal?.aborted !== true) throw error
    const stop = interruption(signal)
    io.stderr.write(
      `servegate: ${stop.message}; every shard was stopped, their records (partial) are ${shardRecordPath(provisional, 0).replace(/0\.json$/, '<i>.json')}\n`,
    )
    return stop.exitCode
  }
  const path = await writeMerged(merged, out, provisional, role.shards)
  return reportMerged(merged, path, values.json === true, io)
}

/**
 * Kubernetes pod 0, once every shard's record came: writes the merged record beside its own and
 * prints its bytes between two marker lines (`recordLogLines`), so `kubectl logs` carries it out
 * of a pod that has ended.
 */
export async function printMergedRecord(record: RunRecord, out: string, io: CliIo): Promise<void> {
  const path = mergedRecordPath(out)
  await writeRunRecord(path, record)
  io.stdout.write(recordLogLines(await readFile(path)))
}
