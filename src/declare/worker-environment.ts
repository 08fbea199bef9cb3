import { createConnection, type Socket } from 'node:net'
import { afterAll } from 'vitest'
import { createEnvironment, type SendProgress } from '../runner/environment.ts'
import { Runner } from '../runner/runner.ts'
import { PROGRESS_CONTEXT_KEY, ProgressContext } from '../schema/progress.ts'
import { provided, workerOptions } from '../worker/provided-options.ts'

/** Open channels of this worker process, by socket: a file's modules are evaluated afresh, the worker's socket is not. */
const CHANNELS = Symbol.for('servegate.progress.channels')
type Channels = Map<string, SendProgress>

function channels(): Channels {
  const holder = globalThis as { [CHANNELS]?: Channels }
  holder[CHANNELS] ??= new Map()
  return holder[CHANNELS]
}

/** Newline-delimited JSON over a local socket that never keeps the worker alive; a dead socket drops what it is given. */
function connect(socketPath: string): SendProgress {
  let socket: Socket | null = createConnection(socketPath)
  socket.unref()
  socket.on('error', () => {
    socket?.destroy()
    socket = null
  })
  return (event) => {
    socket?.write(`${JSON.stringify(event)}\n`)
  }
}

/**
 * Where this worker's cells report their phases: the socket the progress reporter provided,
 * or null when none did (no reporter, or not in vitest).
 */
function progressChannel(): SendProgress | null {
  const context = ProgressContext.safeParse(provided(PROGRESS_CONTEXT_KEY))
  if (!context.success) return null
  const open = channels()
  let send = open.get(context.data.socketPath)
  if (send === undefined) {
    send = connect(context.data.socketPath)
    open.set(context.data.socketPath, send)
  }
  return send
}

let runner: Runner | null = null

/**
 * This worker's runner, built on first use from what the plugin provided (its `nvidiaSmi`) and
 * the progress reporter's socket: every cell of the file runs through it, so they share one
 * environment and the file's engines.
 */
export function workerRunner(): Runner {
  if (runner === null) {
    runner = new Runner(createEnvironment({ nvidiaSmi: workerOptions().nvidiaSmi, progress: progressChannel() }))
  }
  return runner
}

/** Stops the engines this file's cells shared (the whole process trees), each saying so. */
export async function stopSharedEngines(): Promise<void> {
  await runner?.stopShared()
}

let hookRegistered = false
/** Set by the plugin's setup file, whose file-level hook then stops the engines after the whole file. */
let fileHookInstalled = false

/** Called by the plugin's setup file: engines are stopped by its file-level hook, not a suite's. */
export function useFileTeardown(): void {
  fileHookInstalled = true
}

/**
 * Registers the file's teardown when the plugin's setup file did not (a spec run without the
 * plugin): an `afterAll` of the suite being collected.
 */
export function registerTeardown(): void {
  if (hookRegistered || fileHookInstalled) return
  hookRegistered = true
  afterAll(async () => {
    hookRegistered = false
    await stopSharedEngines()
  })
}
