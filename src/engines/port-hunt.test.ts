import { alive } from '../../fixtures/processes.ts'
import { createServer, type Server } from 'node:net'
import { fileURLToPath } from 'node:url'
import { execa, type ResultPromise } from 'execa'
import { afterEach, describe, expect, test } from 'vitest'
import { listeningSockets, portAccepts } from './launch-token.ts'
import { huntPortListeners, type PortHuntOptions } from './port-hunt.ts'
import { signalPid, startTime } from './process-tree.ts'

const FAKES = fileURLToPath(new URL('../../fixtures/fakes/', import.meta.url))

const children: ResultPromise[] = []
afterEach(() => {
  for (const child of children.splice(0)) signalPid(child.pid as number, 'SIGKILL')
})

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  await new Promise((r) => server.close(r))
  return port
}

/**
 * A simulated engine's server on a free port, in a process of its own: one that stops on SIGTERM
 * (env-clearing-engine's server) or one that ignores it (stubborn-engine's child).
 */
async function listener(kind: 'obeys' | 'ignores-sigterm', uid?: number): Promise<{ pid: number; port: number; ticks: number }> {
  const port = await freePort()
  const argv =
    kind === 'obeys'
      ? [`${FAKES}env-clearing-engine`, '--serve', String(port), 'm', '']
      : [`${FAKES}stubborn-engine`, '--child', String(port), 'm']
  const child = execa(process.execPath, argv, { stdio: 'ignore', reject: false, ...(uid === undefined ? {} : { uid, gid: uid }) })
  children.push(child)
  await expect.poll(() => portAccepts(port, 200), { timeout: 20_000 }).toBe(true)
  return { pid: child.pid as number, port, ticks: Number(await startTime(child.pid as number)) }
}

/** The hunt on `port` as a launch that started at `startTicks` and held the port when its teardown began. */
function options(port: number, startTicks: number, over: Partial<PortHuntOptions> = {}): PortHuntOptions {
  return {
    kind: 'command',
    port,
    allocated: true,
    token: 'no-such-token',
    startTicks,
    socketsAtStop: listeningSockets(port),
    graceMs: 500,
    ...over,
  }
}

describe('huntPortListeners stops only what is the launch’s', () => {
  test('a listener that started with the launch and held its port: SIGTERM, the port closes', async () => {
    const server = await listener('obeys')
    const [found] = await huntPortListeners(options(server.port, server.ticks))
    expect(found?.survivor).toEqual({ pid: server.pid, command: expect.stringContaining('--serve'), foundBy: 'port', endedBy: 'SIGTERM' })
    expect(found?.finding).toMatch(/^engine command: pid \d+ \(.*\) still listened on the engine's port after teardown: ended by SIGTERM$/)
    expect(alive(server.pid)).toBe(false)
    expect(await portAccepts(server.port)).toBe(false)
  })

  test('one that ignores SIGTERM: SIGKILL after the grace period', async () => {
    const server = await listener('ignores-sigterm')
    const [found] = await huntPortListeners(options(server.port, server.ticks))
    expect(found?.survivor.endedBy).toBe('SIGKILL')
    expect(alive(server.pid)).toBe(false)
  })

  test.for<[string, (s: { port: number; ticks: number }) => PortHuntOptions, RegExp]>([
    ['it started before the engine', (s) => options(s.port, s.ticks + 1), /left running: it did not start after the engine$/],
    [
      'it bound the port after teardown began',
      (s) => options(s.port, s.ticks, { socketsAtStop: new Set() }),
      /left running: it bound the port after teardown began$/,
    ],
    [
      'the config set the port',
      (s) => options(s.port, s.ticks, { allocated: false }),
      /left running: the engine's config set port \d+ and the process carries no token of this launch$/,
    ],
    [
      'the engine’s start is unknown',
      (s) => options(s.port, s.ticks, { startTicks: null }),
      /left running: it did not start after the engine$/,
    ],
  ])('not the launch’s when %s: reported, left running', async ([, hunt, why]) => {
    const server = await listener('obeys')
    const found = await huntPortListeners(hunt(server))
    expect(found).toEqual([
      { survivor: expect.objectContaining({ pid: server.pid, foundBy: 'port', endedBy: null }), finding: expect.stringMatching(why) },
    ])
    expect(alive(server.pid)).toBe(true)
    expect(await portAccepts(server.port)).toBe(true)
  })

  test('another user’s process is never stopped', async (ctx) => {
    // Only root can start one; servegate as another user cannot read its sockets at all.
    if (process.getuid?.() !== 0) return ctx.skip('needs root to start a process as another user')
    const server = await listener('obeys', 65534)
    const found = await huntPortListeners(options(server.port, server.ticks))
    expect(found).toEqual([
      {
        survivor: expect.objectContaining({ pid: server.pid, endedBy: null }),
        finding: expect.stringMatching(/left running: it runs as another user$/),
      },
    ])
    expect(alive(server.pid)).toBe(true)
  })

  test('servegate’s own process is never stopped, whatever it listens on', async () => {
    const server: Server = createServer()
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    const { port } = server.address() as { port: number }
    try {
      const found = await huntPortListeners(options(port, 0))
      expect(found).toEqual([
        {
          survivor: expect.objectContaining({ pid: process.pid, endedBy: null }),
          finding: expect.stringMatching(/left running: it is servegate itself or one of its parents$/),
        },
      ])
    } finally {
      await new Promise((r) => server.close(r))
    }
  })
})
