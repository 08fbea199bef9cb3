import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { ServegateError } from '../errors.ts'
import { parseRunText } from '../record/record-io.ts'
import type { CliIo } from './cli-io.ts'
import { recordFromLog, reportMerged } from './merged-record.ts'
import type { ShardRole } from './shards-command.ts'

/** The port pod 0 coordinates on, reached by the others at `<job>-0.<job>:PORT` through the Job's headless Service. */
const KUBERNETES_COORDINATOR_PORT = 7470

/** Where each pod writes its own shard record (pod 0 writes the merged one beside it and prints it). */
const POD_OUT = '/tmp/servegate/shard.json'

type KubernetesRole = Extract<ShardRole, { kind: 'kubernetes' }>

/** A YAML scalar: every string JSON-quoted (valid YAML, and no string is ever read as a number or a boolean). */
function scalar(value: string | number | boolean): string {
  return typeof value === 'string' ? JSON.stringify(value) : String(value)
}

type Yaml = string | number | boolean | Yaml[] | { [key: string]: Yaml }

/** Block-style YAML of a plain value, indented by `indent` spaces. */
function toYaml(value: Yaml, indent = 0): string {
  const pad = ' '.repeat(indent)
  if (Array.isArray(value)) {
    if (value.length === 0) return `${pad}[]\n`
    return value
      .map((item) => {
        if (typeof item !== 'object') return `${pad}- ${scalar(item)}\n`
        const nested = toYaml(item, indent + 2)
        return `${pad}- ${nested.slice(indent + 2)}`
      })
      .join('')
  }
  if (typeof value !== 'object') return `${pad}${scalar(value)}\n`
  return Object.entries(value)
    .map(([key, v]) => {
      if (typeof v !== 'object') return `${pad}${key}: ${scalar(v)}\n`
      if (Array.isArray(v) && v.length === 0) return `${pad}${key}: []\n`
      return `${pad}${key}:\n${toYaml(v, indent + 2)}`
    })
    .join('')
}

/**
 * The Indexed Job and its headless Service that run `servegate run --shards N` as N pods
 * (`completionMode: Indexed`, `completions` and `parallelism` N, `backoffLimit` 0: a failed shard
 * fails the Job). Each pod runs the same `servegate run` with the cell's flags, `--shards N` and
 * `--coordinator <job>-0.<job>:7470`; its index is JOB_COMPLETION_INDEX, which the Job controller
 * sets, and pod 0 coordinates. The Service (`clusterIP: None`, selecting `job-name: <job>`, the
 * pods' `subdomain`) gives pod 0 its DNS name `<job>-0.<job>`, published before it is ready.
 * @param cellArgv the pods' `servegate run` arguments: the cell's flags and `--shards N`, the launcher's own removed
 */
function jobManifest(role: KubernetesRole, cellArgv: readonly string[]): string {
  const labels = { 'app.kubernetes.io/name': 'servegate', 'app.kubernetes.io/instance': role.job }
  const metadata = { name: role.job, namespace: role.namespace, labels }
  const service: Yaml = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata,
    spec: {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector: { 'job-name': role.job },
      ports: [{ name: 'coordinator', port: KUBERNETES_COORDINATOR_PORT, protocol: 'TCP' }],
    },
  }
  const args = [...cellArgv, `--coordinator=${role.job}-0.${role.job}:${KUBERNETES_COORDINATOR_PORT}`, `--out=${POD_OUT}`]
  const job: Yaml = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata,
    spec: {
      completionMode: 'Indexed',
      completions: role.shards,
      parallelism: role.shards,
      backoffLimit: 0,
      template: {
        metadata: { labels },
        spec: {
          subdomain: role.job,
          restartPolicy: 'Never',
          containers: [
            {
              name: 'servegate',
              image: role.image,
              command: ['servegate'],
              args,
              ...(role.apiKey === null
                ? {}
                : { env: [{ name: role.apiKey.env, valueFrom: { secretKeyRef: { name: role.apiKey.secret, key: role.apiKey.env } } }] }),
              ports: [{ name: 'coordinator', containerPort: KUBERNETES_COORDINATOR_PORT }],
            },
          ],
        },
      },
    },
  }
  return `${toYaml(service)}---\n${toYaml(job)}`
}

/** Runs kubectl from an argv (never a shell): its exit code and output. */
async function kubectl(args: readonly string[], signal?: AbortSignal): Promise<{ code: number; stdout: string; stderr: string }> {
  const { execa } = await import('execa')
  const r = await execa('kubectl', args, { reject: false, stdin: 'ignore', ...(signal === undefined ? {} : { cancelSignal: signal }) })
  if (r.isCanceled) return { code: 130, stdout: String(r.stdout), stderr: String(r.stderr) }
  if (r.failed && r.exitCode === undefined)
    throw new ServegateError('CONFIG_INVALID', `--kubernetes-job: cannot run kubectl (${r.shortMessage}); put kubectl on PATH`)
  return { code: r.exitCode ?? 1, stdout: String(r.stdout), stderr: String(r.stderr) }
}

/**
 * Waits for the Job to end: `kubectl wait --for=condition=complete` and `--for=condition=failed`
 * side by side, the first to hold deciding (kubectl exits 0 once its condition is met).
 * @returns `complete` or `failed`; throws when neither held within the wait
 */
async function waitForJob(role: KubernetesRole, signal?: AbortSignal): Promise<'complete' | 'failed'> {
  const stop = new AbortController()
  const both = signal === undefined ? stop.signal : AbortSignal.any([signal, stop.signal])
  const wait = async (condition: 'complete' | 'failed'): Promise<'complete' | 'failed' | null> => {
    const r = await kubectl(
      ['wait', '-n', role.namespace, `--for=condition=${condition}`, `job/${role.job}`, `--timeout=${role.waitS}s`],
      both,
    )
    return r.code === 0 ? condition : null
  }
  const outcomes = [wait('complete'), wait('failed')]
  const first = await new Promise<'complete' | 'failed' | null>((resolve) => {
    let pending = outcomes.length
    for (const p of outcomes) void p.then((v) => (v !== null ? resolve(v) : --pending === 0 && resolve(null)))
  })
  stop.abort()
  await Promise.allSettled(outcomes)
  if (first !== null) return first
  throw new ServegateError(
    'INTERNAL',
    `--kubernetes-job ${role.job}: the Job neither completed nor failed within ${role.waitS} s (--kubernetes-wait-s)`,
  )
}

/**
 * The logs of the Job's pod of index `index` (the label the Job controller sets on each pod),
 * every line: with `-l`, kubectl's `--tail` defaults to 10 lines, so `--tail=-1`.
 */
async function podLogs(role: KubernetesRole, index: number): Promise<string> {
  const selector = `job-name=${role.job},batch.kubernetes.io/job-completion-index=${index}`
  const r = await kubectl(['logs', '-n', role.namespace, '-l', selector, '--tail=-1'])
  return r.code === 0 ? r.stdout : `(kubectl logs failed: ${r.stderr.trim()})`
}

/**
 * `servegate run --shards N --kubernetes-job NAME`: renders the Indexed Job and its headless
 * Service (`--print-manifest` prints them and stops), applies them with kubectl, waits for the
 * Job to complete or fail, cuts the merged record out of pod 0's log (`kubectl logs`: a pod that
 * has ended keeps its log, where `kubectl cp` needs it running), writes it to `--out`, and
 * deletes the Job and the Service whatever happened.
 * @param cellArgv what each pod runs (`servegate run` and the cell's flags, `--shards N` among them)
 * @returns `run`'s exit code for the merged record; throws naming the Job when it failed or timed out
 */
export async function kubernetesJobCommand(
  role: KubernetesRole,
  cellArgv: readonly string[],
  values: Record<string, string | boolean | undefined>,
  io: CliIo,
  signal?: AbortSignal,
): Promise<number> {
  const manifest = jobManifest(role, cellArgv)
  if (role.printOnly) {
    io.stdout.write(manifest)
    return 0
  }
  const dir = await mkdtemp(join(tmpdir(), 'servegate-job-'))
  const file = join(dir, `${role.job}.yaml`)
  await writeFile(file, manifest)
  try {
    const applied = await kubectl(['apply', '-n', role.namespace, '-f', file], signal)
    if (applied.code !== 0)
      throw new ServegateError('ENGINE_DEPLOY_FAILED', `--kubernetes-job ${role.job}: kubectl apply failed: ${applied.stderr.trim()}`)
    io.stderr.write(`servegate: Job ${role.namespace}/${role.job} applied (${role.shards} pods); waiting for it\n`)
    const outcome = await waitForJob(role, signal)
    const log = await podLogs(role, 0)
    if (outcome === 'failed') {
      throw new ServegateError(
        'INTERNAL',
        `--kubernetes-job ${role.job}: the Job failed (a shard's pod exited non-zero); pod 0's log ends:\n${log.trimEnd().split('\n').slice(-8).join('\n')}`,
      )
    }
    const bytes = recordFromLog(log)
    if (bytes === null) throw new ServegateError('INTERNAL', `--kubernetes-job ${role.job}: pod 0's log holds no merged record`)
    const record = parseRunText(bytes.toString('utf8'), `pod 0 of job ${role.job}`)
    const path = resolve((values.out as string | undefined) ?? join('servegate-runs', `${record.runId}.json`))
    await writeFile(path, bytes)
    return reportMerged(record, path, values.json === true, io)
  } finally {
    await kubectl(['delete', '-n', role.namespace, '-f', file, '--ignore-not-found', '--wait=true'])
    await rm(dir, { recursive: true, force: true })
  }
}
