import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest'
import { alive } from '../../fixtures/processes.ts'
import { engine } from '../declare/engine-handles.ts'
import { sanitizeMessage } from '../errors.ts'
import { createEnvironment, type Environment } from '../runner/environment.ts'
import { runEngineCell } from '../runner/runner.ts'
import type { Manifest } from '../schema/manifest.ts'
import { RunRecord } from '../schema/run.ts'
import { type EngineConfig, resolveEngineConfig } from './config.ts'
import { applyArgv, checkArgv, type KubernetesConfig, removeArgv, shownArgv, waitArgvs } from './kubernetes.ts'
import { portAccepts } from './launch-token.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))
const KUBECTL = join(FAKES, 'kubectl')
const HELM = join(FAKES, 'helm')
const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const noGpu = async (): Promise<Manifest['gpus']> => ({ status: 'absent', reason: 'test: no GPU probe' })
const cell = { requests: 4, concurrency: 2, maxTokens: 8, workload: { promptTokens: 16 } }

let dir = ''
let env: Environment
let state = ''
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'servegate-kube-'))
  env = { ...createEnvironment({ logDir: join(dir, 'logs') }), gpuFacts: noGpu, telemetry: false }
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

/** A fresh fake cluster per test: its state directory, named to the fakes by SERVEGATE_FAKE_KUBE_STATE. */
async function cluster(): Promise<string> {
  state = join(dir, `state-${Math.random().toString(36).slice(2)}`)
  vi.stubEnv('SERVEGATE_FAKE_KUBE_STATE', state)
  return state
}
afterEach(async () => {
  // Whatever a failing test left: its pods are SIGKILLed.
  for (const pid of podPids()) process.kill(pid, 'SIGKILL')
  vi.unstubAllEnvs()
})

/** The fake cluster's pods still running for this test's state directory (their listen addresses are unique). */
const listens = new Set<string>()
function podPids(): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0')
      if (cmd.some((a) => a.endsWith('kube-pod.ts')) && cmd.some((a) => listens.has(a)) && alive(Number(entry))) pids.push(Number(entry))
    } catch {
      // Gone meanwhile.
    }
  }
  return pids
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** What the fake cluster holds: stored objects and Helm releases (files under its state directory). */
function leftInCluster(): string[] {
  const files: string[] = []
  for (const sub of ['objects', 'releases']) {
    const root = join(state, sub)
    if (!existsSync(root)) continue
    for (const ns of readdirSync(root)) files.push(...readdirSync(join(root, ns)).map((f) => `${sub}/${ns}/${f}`))
  }
  return files
}

/** Every kubectl and helm invocation the fakes saw, in order. */
async function calls(): Promise<string[][]> {
  const text = await readFile(join(state, 'calls.log'), 'utf8').catch(() => '')
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as string[])
}

interface PodOptions {
  readyAfterMs?: number
  neverReady?: boolean
}

/** A manifest of a Deployment that serves the sim on `port` (the fake's test convention) and its Service. */
async function manifest(port: number, o: PodOptions = {}): Promise<string> {
  listens.add(`127.0.0.1:${port}`)
  const path = join(dir, `vllm-${port}.yaml`)
  await writeFile(
    path,
    [
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata:',
      '  name: vllm',
      '  annotations:',
      `    servegate.test/listen: "127.0.0.1:${port}"`,
      '    servegate.test/model: m',
      `    servegate.test/ready-after-ms: "${o.readyAfterMs ?? 300}"`,
      `    servegate.test/never-ready: "${o.neverReady === true}"`,
      'spec:',
      '  replicas: 1',
      '---',
      'apiVersion: v1',
      'kind: Service',
      'metadata:',
      '  name: vllm',
      'spec:',
      '  ports:',
      `    - port: ${port}`,
      '',
    ].join('\n'),
  )
  return path
}

/** A local chart whose Deployment serves the sim at `.Values.listen`. */
async function chart(): Promise<string> {
  const path = join(dir, 'chart')
  if (existsSync(path)) return path
  await mkdir(join(path, 'templates'), { recursive: true })
  await writeFile(join(path, 'Chart.yaml'), 'apiVersion: v2\nname: sim\nversion: 0.1.0\n')
  await writeFile(join(path, 'values.yaml'), 'model: m\nlisten: "127.0.0.1:1"\nneverReady: "false"\n')
  await writeFile(
    join(path, 'templates', 'deployment.yaml'),
    [
      'apiVersion: apps/v1',
      'kind: Deployment',
      'metadata:',
      '  name: {{ .Release.Name }}',
      '  annotations:',
      '    servegate.test/listen: {{ .Values.listen | quote }}',
      '    servegate.test/model: {{ .Values.model }}',
      '    servegate.test/never-ready: {{ .Values.neverReady | quote }}',
      '',
    ].join('\n'),
  )
  return path
}

const base = (port: number) => ({ kind: 'kubernetes' as const, baseUrl: `http://127.0.0.1:${port}`, model: { id: 'm' }, kubectl: KUBECTL })

describe('kubernetes configs are refused before any kubectl call', () => {
  test.each([
    [{}, /engine\.manifest, engine\.helm: neither is set; set exactly one: manifest .* or helm/],
    [{ manifest: 'a.yaml', helm: { chart: './c', release: 'r' } }, /engine\.manifest, engine\.helm: both are set; set exactly one/],
    [{ helm: { chart: './c', release: 'Bad_Name' } }, /engine\.helm\.release: a Helm release name must be a DNS-1123 label/],
    [{ helm: { chart: './c', release: 'r'.repeat(54) } }, /engine\.helm\.release: a Helm release name has at most 53 characters/],
    [{ manifest: 'a.yaml', namespace: 'Bench' }, /engine\.namespace: a namespace must be a DNS-1123 label/],
    [{ manifest: 'a.yaml', rollout: ['pod/x'] }, /engine\.rollout\.0: must be deployment\/NAME, statefulset\/NAME or daemonset\/NAME/],
    [{ manifest: 'a.yaml', wait: [{ resource: 'vllm' }] }, /engine\.wait\.0\.resource: must be TYPE\/NAME, e\.g\. deployment\/vllm/],
  ])('%j', (fields, message) => {
    expect(() => resolveEngineConfig({ ...base(8000), ...fields })).toThrow(message)
  })

  test('engine.kubernetes in a spec fails at declaration', () => {
    expect(() => engine.kubernetes({ baseUrl: 'http://10.1.2.3:80', model: { id: 'm' } })).toThrow(
      /engine\.manifest, engine\.helm: neither is set/,
    )
    expect(engine.kubernetes({ baseUrl: 'http://10.1.2.3:80', model: { id: 'm' }, manifest: 'a.yaml' }).config.kind).toBe('kubernetes')
  })

  test('gpuMetricsUrl: a DCGM exporter on the cluster is allowed (the kind is remote), a non-URL is refused', () => {
    const remote = { ...base(8000), manifest: 'a.yaml', gpuMetricsUrl: 'http://10.0.0.5:9400/metrics' }
    expect(resolveEngineConfig(remote)).toMatchObject({ gpuMetricsUrl: 'http://10.0.0.5:9400/metrics' })
    expect(() => resolveEngineConfig({ ...remote, gpuMetricsUrl: 'dcgm:9400' })).toThrow(/engine\.gpuMetricsUrl: /)
  })

  test('a baseUrl that is not a URL names the field', () => {
    expect(() => resolveEngineConfig({ ...base(8000), baseUrl: 'gateway:80', manifest: 'a.yaml' })).toThrow(
      /engine\.baseUrl: protocol gateway: is not supported; use http:\/\/ or https:\/\//,
    )
  })

  test('a remote gateway needs no remote flag: the kind names it on purpose', () => {
    const config = resolveEngineConfig({ ...base(8000), baseUrl: 'http://10.1.2.3:80', manifest: 'a.yaml' })
    expect(config).toMatchObject({ kind: 'kubernetes', namespace: 'default', healthPath: '/v1/models', startupTimeoutMs: 900_000 })
  })

  test('a manifest or values file that is not there fails the launch before kubectl or helm runs', async () => {
    await cluster()
    await expect(runEngineCell(env, { ...base(8000), manifest: join(dir, 'missing.yaml') }, cell)).rejects.toThrow(
      /engine\.manifest: no file at .*missing\.yaml; fix the path/,
    )
    await expect(
      runEngineCell(env, { ...base(8000), helm: { chart: './c', release: 'r', values: [join(dir, 'nope.yaml')], executable: HELM } }, cell),
    ).rejects.toThrow(/engine\.helm\.values\[0\]: no file at .*nope\.yaml/)
    expect(await calls()).toEqual([])
  })
})

describe('the tool calls', () => {
  const resolved = (fields: Partial<EngineConfig>): KubernetesConfig =>
    resolveEngineConfig({ ...base(8000), kubectl: 'kubectl', ...fields }) as KubernetesConfig

  test('a manifest: apply, rollout status and wait, delete with foreground cascading, get that lists nothing', () => {
    const c = resolved({
      manifest: 'vllm.yaml',
      namespace: 'bench',
      context: 'gpu',
      rollout: ['deployment/vllm'],
      wait: [{ resource: 'deployment/vllm' }],
    })
    const g = ['--context', 'gpu']
    expect(applyArgv(c, 60_000)).toEqual(['kubectl', ...g, 'apply', '-f', 'vllm.yaml', '-n', 'bench'])
    expect(waitArgvs(c, 90_500)).toEqual([
      ['kubectl', ...g, 'rollout', 'status', 'deployment/vllm', '--timeout=91s', '-n', 'bench'],
      ['kubectl', ...g, 'wait', '--for=condition=Available', 'deployment/vllm', '--timeout=91s', '-n', 'bench'],
    ])
    expect(removeArgv(c)).toEqual([
      'kubectl',
      ...g,
      'delete',
      '-f',
      'vllm.yaml',
      '--wait=true',
      '--cascade=foreground',
      '--ignore-not-found',
      '--timeout=300s',
      '-n',
      'bench',
    ])
    expect(checkArgv(c)).toEqual(['kubectl', ...g, 'get', '-f', 'vllm.yaml', '-o', 'name', '--ignore-not-found', '-n', 'bench'])
  })

  test('a Helm release: install --wait with values, sets and version; uninstall --wait; status', () => {
    const c = resolved({
      helm: {
        chart: 'oci://r/vllm',
        release: 'bench-a',
        values: ['v.yaml'],
        set: { replicas: '2', hfToken: 'hf_abcdefgh12345' },
        version: '1.2.3',
      },
      kubeconfig: '/k/config',
      context: 'gpu',
    })
    const g = ['--kube-context', 'gpu', '--kubeconfig', '/k/config']
    const install = applyArgv(c, 600_000)
    expect(install).toEqual([
      'helm',
      ...g,
      'install',
      'bench-a',
      'oci://r/vllm',
      '--wait',
      '--timeout',
      '600s',
      '-f',
      'v.yaml',
      '--set',
      'replicas=2',
      '--set',
      'hfToken=hf_abcdefgh12345',
      '--version',
      '1.2.3',
      '-n',
      'default',
    ])
    expect(shownArgv(install)).toContain('hfToken=[redacted]')
    expect(shownArgv(install)).toContain('replicas=2')
    expect(removeArgv(c)).toEqual([
      'helm',
      ...g,
      'uninstall',
      'bench-a',
      '--wait',
      '--cascade',
      'foreground',
      '--timeout',
      '300s',
      '-n',
      'default',
    ])
    expect(checkArgv(c)).toEqual(['helm', ...g, 'status', 'bench-a', '-n', 'default'])
  })
})

describe('a cell on a kubernetes deployment, through the fake kubectl and helm', () => {
  test('a manifest: applied, rolled out, measured, deleted, and checked gone', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    const file = await manifest(port)
    const config: EngineConfig = {
      ...base(port),
      manifest: file,
      namespace: 'bench',
      rollout: ['deployment/vllm'],
      wait: [{ resource: 'deployment/vllm' }],
    }
    const record = await runEngineCell(env, config, cell)
    expect(RunRecord.parse(record)).toBeTruthy()
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(4)
    expect(record.manifest?.engine).toMatchObject({
      kind: 'kubernetes',
      shape: 'http',
      argv: [KUBECTL, 'apply', '-f', file, '-n', 'bench'],
    })
    expect(record.teardown).toEqual({
      survivors: [],
      portClosed: true,
      findings: [],
      release: {
        tool: 'kubectl',
        name: file,
        namespace: 'bench',
        removed: true,
        checkedWith: `${KUBECTL} get -f ${file} -o name --ignore-not-found -n bench`,
      },
    })
    expect((await calls()).map((c) => c.slice(1, 3))).toEqual([
      ['apply', '-f'],
      ['rollout', 'status'],
      ['wait', '--for=condition=Available'],
      ['delete', '-f'],
      ['get', '-f'],
    ])
    expect(await portAccepts(port)).toBe(false)
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })

  test('a Helm release: installed with --wait, measured, uninstalled, and helm status finds none', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    listens.add(`127.0.0.1:${port}`)
    const values = join(dir, 'values.yaml')
    await writeFile(values, 'model: m\n')
    const config: EngineConfig = {
      ...base(port),
      helm: {
        chart: await chart(),
        release: 'bench-a',
        values: [values],
        set: { listen: `127.0.0.1:${port}`, hfToken: 'hf_kubetestsecret123' },
        executable: HELM,
      },
      namespace: 'bench',
      rollout: ['deployment/bench-a'],
    }
    const record = await runEngineCell(env, config, cell)
    expect(record.cellFailure).toBeNull()
    expect(record.completed).toBe(4)
    expect(record.teardown?.release).toEqual({
      tool: 'helm',
      name: 'bench-a',
      namespace: 'bench',
      removed: true,
      checkedWith: `${HELM} status bench-a -n bench`,
    })
    expect((await calls()).map((c) => `${c[0]} ${c[1]}`)).toEqual(['helm install', 'kubectl rollout', 'helm uninstall', 'helm status'])
    // A secret --set value: redacted in the manifest's argv and the tools' log, scrubbed from anything else written.
    expect(record.manifest?.engine.argv).toContain('hfToken=[redacted]')
    const logs = readdirSync(join(dir, 'logs')).filter((f) => f.startsWith('kubernetes-bench-a-'))
    expect(logs.length).toBeGreaterThan(0)
    for (const f of logs) expect(await readFile(join(dir, 'logs', f), 'utf8')).not.toContain('hf_kubetestsecret123')
    expect(sanitizeMessage('helm said hf_kubetestsecret123')).toBe('helm said [redacted]')
    expect(await portAccepts(port)).toBe(false)
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })

  test(
    "a rollout that never completes: a failed cell with kubectl's reason, and the deployment still torn down",
    { timeout: 60_000 },
    async () => {
      await cluster()
      const port = await freePort()
      const file = await manifest(port, { neverReady: true })
      const config: EngineConfig = { ...base(port), manifest: file, rollout: ['deployment/vllm'], startupTimeoutMs: 2000 }
      const record = await runEngineCell(env, config, cell)
      expect(record.cellFailure?.code).toBe('ENGINE_START_TIMEOUT')
      // The rollout gets what is left of the 2 s after the apply: 2s, or 1s on a loaded machine.
      expect(record.cellFailure?.message).toMatch(
        /`.*kubectl rollout status deployment\/vllm --timeout=[12]s -n default` timed out within startupTimeoutMs \(2000 ms\)/,
      )
      expect(record.cellFailure?.message).toMatch(/error: timed out waiting for the condition/)
      expect(record.cellFailure?.message).toMatch(/the partial deployment was torn down \(kubectl; `.* get -f .*` finds nothing left\)/)
      expect(record.requests).toEqual([])
      expect(record.teardown?.release).toMatchObject({ tool: 'kubectl', removed: true })
      expect(podPids()).toEqual([])
      expect(leftInCluster()).toEqual([])
    },
  )

  test("a Helm install that times out: helm's own error, and the failed release uninstalled", { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    listens.add(`127.0.0.1:${port}`)
    const config: EngineConfig = {
      ...base(port),
      helm: { chart: await chart(), release: 'never', set: { listen: `127.0.0.1:${port}`, neverReady: 'true' }, executable: HELM },
      startupTimeoutMs: 1500,
    }
    const record = await runEngineCell(env, config, cell)
    expect(record.cellFailure?.code).toBe('ENGINE_START_TIMEOUT')
    expect(record.cellFailure?.message).toMatch(/Error: INSTALLATION FAILED: context deadline exceeded/)
    expect(record.teardown?.release).toEqual({
      tool: 'helm',
      name: 'never',
      namespace: 'default',
      removed: true,
      checkedWith: `${HELM} status never -n default`,
    })
    expect((await calls()).map((c) => `${c[0]} ${c[1]}`)).toEqual(['helm install', 'helm uninstall', 'helm status'])
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })

  test(
    'a chart helm cannot find: ENGINE_DEPLOY_FAILED with its stderr; nothing was installed, nothing is left',
    { timeout: 30_000 },
    async () => {
      await cluster()
      const config: EngineConfig = { ...base(8000), helm: { chart: join(dir, 'no-chart'), release: 'r', executable: HELM } }
      const record = await runEngineCell(env, config, cell)
      expect(record.cellFailure?.code).toBe('ENGINE_DEPLOY_FAILED')
      expect(record.cellFailure?.message).toMatch(
        /`.*helm install r .*no-chart .*` failed \(exit 1\): Error: INSTALLATION FAILED: path ".*no-chart" not found/,
      )
      expect(record.teardown?.release).toMatchObject({ tool: 'helm', removed: true })
      expect(record.teardown?.findings).toEqual([])
    },
  )

  test('a log directory that cannot be made: the cell still runs, and the deployment is still removed', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    const notADir = join(dir, `file-${port}`)
    await writeFile(notADir, '')
    const record = await runEngineCell({ ...env, logDir: join(notADir, 'logs') }, { ...base(port), manifest: await manifest(port) }, cell)
    expect(record.cellFailure).toBeNull()
    expect(record.teardown?.release).toMatchObject({ removed: true })
    expect(leftInCluster()).toEqual([])
  })

  test('a gateway that never answers: ENGINE_START_TIMEOUT naming baseUrl, and the deployment removed', { timeout: 60_000 }, async () => {
    await cluster()
    const [port, elsewhere] = [await freePort(), await freePort()]
    const config: EngineConfig = { ...base(elsewhere), manifest: await manifest(port), startupTimeoutMs: 1500 }
    const record = await runEngineCell(env, config, cell)
    expect(record.cellFailure?.code).toBe('ENGINE_START_TIMEOUT')
    expect(record.cellFailure?.message).toMatch(
      new RegExp(`engine kubernetes was deployed but http://127\\.0\\.0\\.1:${elsewhere} did not answer GET /v1/models with 200`),
    )
    expect(record.teardown?.release).toMatchObject({ removed: true })
    expect(await portAccepts(port)).toBe(false)
    expect(leftInCluster()).toEqual([])
  })

  test('kubectl not installed: ENGINE_NOT_FOUND naming the field to set', async () => {
    await cluster()
    const config: EngineConfig = { ...base(8000), kubectl: join(dir, 'no-kubectl'), manifest: await manifest(await freePort()) }
    const record = await runEngineCell(env, config, cell)
    expect(record.cellFailure).toMatchObject({ code: 'ENGINE_NOT_FOUND' })
    expect(record.cellFailure?.message).toMatch(
      /no-kubectl is not an executable on servegate's PATH; install it or set engine\.kubectl to its path/,
    )
  })

  test('aborted mid-cell: the partial record, and the deployment torn down', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    const file = await manifest(port)
    const abort = new AbortController()
    const record = await runEngineCell(
      env,
      { ...base(port), manifest: file, rollout: ['deployment/vllm'] },
      { requests: 400, concurrency: 1, maxTokens: 64, workload: { promptTokens: 16 } },
      {
        signal: abort.signal,
        onProgress: (p) => {
          if (p.ok >= 2) abort.abort()
        },
      },
    )
    expect(record.completed).toBeGreaterThanOrEqual(2)
    expect(record.completed).toBeLessThan(400)
    expect(record.teardown?.release).toMatchObject({ tool: 'kubectl', removed: true })
    expect(await portAccepts(port)).toBe(false)
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })

  test('aborted during the rollout: REQUEST_ABORTED, kubectl stopped, the deployment torn down', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    const file = await manifest(port, { readyAfterMs: 60_000 })
    const abort = new AbortController()
    // Once kubectl is waiting on the rollout (a loaded machine can take over a second to apply).
    let rolling = false
    const watch = setInterval(() => {
      void calls().then((seen) => {
        if (rolling || !seen.some((argv) => argv.includes('rollout'))) return
        rolling = true
        clearInterval(watch)
        setTimeout(() => abort.abort(), 300)
      })
    }, 50)
    const record = await runEngineCell(env, { ...base(port), manifest: file, rollout: ['deployment/vllm'] }, cell, { signal: abort.signal })
    clearInterval(watch)
    expect(record.cellFailure?.code).toBe('REQUEST_ABORTED')
    expect(record.cellFailure?.message).toMatch(/start-up of engine kubernetes was interrupted during `.*rollout status deployment\/vllm/)
    expect(record.teardown?.release).toMatchObject({ removed: true })
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })

  test('Ctrl-C mid-cell in `servegate run --engine`: exit 130, the partial record, the deployment gone', { timeout: 60_000 }, async () => {
    await cluster()
    const port = await freePort()
    const config = join(dir, `kube-${port}.json`)
    await writeFile(config, JSON.stringify({ ...base(port), manifest: await manifest(port), rollout: ['deployment/vllm'] }))
    const out = join(dir, `ctrl-c-${port}.json`)
    const argv = ['run', '--engine', config, '--requests', '400', '--concurrency', '1', '--max-tokens', '64', '--out', out]
    const child = execa(process.execPath, [BIN, ...argv], { reject: false, env: { SERVEGATE_FAKE_KUBE_STATE: state } })
    const sent = async (): Promise<number> =>
      (await readFile(`${out}.requests.jsonl`, 'utf8').catch(() => '')).split('\n').filter(Boolean).length
    await expect.poll(sent, { timeout: 30_000, interval: 100 }).toBeGreaterThan(1)
    child.kill('SIGINT')
    const result = await child
    expect(result.exitCode).toBe(130)
    const record = RunRecord.parse(JSON.parse(await readFile(out, 'utf8')))
    expect(record.completed).toBeLessThan(400)
    expect(record.teardown?.release).toMatchObject({ tool: 'kubectl', removed: true })
    expect((await calls()).map((c) => c[1])).toEqual(['apply', 'rollout', 'delete', 'get'])
    expect(await portAccepts(port)).toBe(false)
    expect(podPids()).toEqual([])
    expect(leftInCluster()).toEqual([])
  })
})
