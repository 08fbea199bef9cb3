/**
 * A stream worker thread: streams the requests the cell's thread hands it over connections of
 * its own (`StreamConnections`), and posts each observation back. Its event loop does nothing but
 * this I/O, so chunk arrivals are stamped (on the process-wide `monoMs` clock) without waiting
 * behind the cell's scheduling, records or progress. Started by `StreamWorkers`; not an entry
 * point of its own.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { parentPort, workerData } from 'node:worker_threads'
import { ServegateError } from '../errors.ts'
import { trustCa } from '../http-request.ts'
import { monoMs } from './clock.ts'
import { StreamConnections } from './connections.ts'
import { ReadBatchingMeter } from './read-batching.ts'
import { streamCompletion } from './stream.ts'
import type { FromWorker, ToWorker, WorkerSetup } from './worker-protocol.ts'

const port = parentPort
if (port === null) throw new ServegateError('INTERNAL', 'stream-worker.ts runs only as a worker thread (started by StreamWorkers)')
const setup = workerData as WorkerSetup
if (setup.ca !== null) trustCa(setup.origin, setup.ca)
const dispatcher = new StreamConnections(setup.origin, setup.connections)
const headers = setup.headers ?? undefined
const inFlight = new Map<number, AbortController>()
const post = (message: FromWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer)

// The measured phase's own figures.
const loopDelay = monitorEventLoopDelay({ resolution: 2 })
let measuring = false
let cpuAtStart = process.threadCpuUsage()
let batching = new ReadBatchingMeter()
let startedAt = 0
let requests = 0
let lags: number[] = []

function send(m: Extract<ToWorker, { type: 'send' }>): void {
  const controller = new AbortController()
  inFlight.set(m.id, controller)
  const body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength)
  void streamCompletion(dispatcher, setup.origin, {
    api: setup.api,
    body,
    headers,
    deadlineMs: setup.deadlineMs,
    signal: controller.signal,
    captureChars: m.capture.contentChars,
    keepStreamedText: m.capture.streamed,
    model: setup.model,
  }).then((obs) => {
    inFlight.delete(m.id)
    if (measuring) {
      requests++
      lags.push(Math.max(0, obs.sentAt - m.handedAt))
    }
    // The chunk times travel without a copy; an empty array has no buffer of its own to give.
    post({ type: 'done', id: m.id, obs }, obs.outputChunkAt.length > 0 ? [obs.outputChunkAt.buffer as ArrayBuffer] : [])
  })
}

async function warm(connections: number): Promise<void> {
  // Best effort: an engine that refuses the extra connections is measured as it is.
  await dispatcher.warm(connections, { path: '/v1/models', headers, timeoutMs: setup.deadlineMs })
  post({ type: 'warmed' })
}

function measureStop(): void {
  const cpu = process.threadCpuUsage(cpuAtStart)
  batching.stop()
  loopDelay.disable()
  measuring = false
  post({
    type: 'measured',
    measure: {
      worker: setup.worker,
      requests,
      cpuMs: (cpu.user + cpu.system) / 1000,
      wallMs: monoMs() - startedAt,
      eventLoopDelayP99Ms: loopDelay.count > 0 ? loopDelay.percentile(99) / 1e6 : null,
      eventLoopDelayMaxMs: loopDelay.count > 0 ? loopDelay.max / 1e6 : null,
      handoffLagsMs: lags,
      readBatching: { pauses: batching.pauses, pausedMs: batching.pausedMs, longestPauseMs: batching.longestPauseMs },
    },
  })
  lags = []
}

port.on('message', (m: ToWorker) => {
  switch (m.type) {
    case 'send':
      send(m)
      return
    case 'abort':
      inFlight.get(m.id)?.abort()
      return
    case 'warm':
      void warm(m.connections)
      return
    case 'measure-start':
      loopDelay.reset()
      loopDelay.enable()
      cpuAtStart = process.threadCpuUsage()
      batching.stop()
      batching = new ReadBatchingMeter()
      startedAt = monoMs()
      requests = 0
      lags = []
      measuring = true
      return
    case 'measure-stop':
      measureStop()
      return
    case 'close':
      for (const controller of inFlight.values()) controller.abort()
      void dispatcher.destroy().then(() => {
        post({ type: 'closed' })
        port.close()
      })
  }
})
post({ type: 'ready' })
