import { once } from 'node:events'
import { createServer, type AddressInfo, connect } from 'node:net'
import { describe, expect, test } from 'vitest'
import { holdThread, turnCounter } from '../../fixtures/event-loop.ts'
import { TurnSlice } from './turn-slice.ts'

describe('TurnSlice', () => {
  test('work past the turn’s slice runs in the next turns, oldest first, at least one a turn', async () => {
    const slice = new TurnSlice(0.25)
    const turns = turnCounter()
    try {
      expect(slice.open).toBe(true)
      slice.run(() => holdThread(1))
      expect(slice.open).toBe(false)
      const ran: Array<[string, number]> = []
      const jobs = ['a', 'b', 'c'].map((name) =>
        slice.later(() => {
          ran.push([name, turns.now()])
          holdThread(1) // each longer than a slice: one a turn
          return name
        }),
      )
      expect(slice.waiting).toBe(3)
      expect(slice.open).toBe(false)
      expect(await Promise.all(jobs)).toEqual(['a', 'b', 'c'])
      expect(ran.map(([name]) => name)).toEqual(['a', 'b', 'c'])
      const [a, b, c] = ran.map(([, turn]) => turn) as [number, number, number]
      expect(b).toBeGreaterThan(a)
      expect(c).toBeGreaterThan(b)
      expect(slice.waiting).toBe(0)
    } finally {
      turns.stop()
    }
  })

  test('short work shares one turn while the slice lasts, and a new turn brings a fresh slice', async () => {
    const slice = new TurnSlice(50)
    for (let i = 0; i < 10; i++) expect(slice.run(() => i)).toBe(i)
    expect(slice.open).toBe(true)
    slice.run(() => holdThread(60))
    expect(slice.open).toBe(false)
    await new Promise((resolve) => setImmediate(resolve))
    expect(slice.open).toBe(true)
  })

  test('work started within running work runs with it, counted once, even while others wait', async () => {
    const slice = new TurnSlice(60)
    slice.run(() => {
      holdThread(10)
      expect(slice.open).toBe(true)
      slice.run(() => holdThread(35))
    })
    // 45 ms counted once leaves room in a 60 ms slice (counted twice, 80 ms would not); the
    // margins are wide enough for a thread preempted by a busy machine.
    expect(slice.open).toBe(true)
    slice.run(() => holdThread(20))
    expect(slice.open).toBe(false)
    const openInside: boolean[] = []
    const jobs = [1, 2].map(() => slice.later(() => openInside.push(slice.open)))
    expect(slice.open).toBe(false)
    await Promise.all(jobs)
    expect(openInside).toEqual([true, true])
  })

  test('a job that throws rejects its own promise; the jobs after it still run', async () => {
    const slice = new TurnSlice(1e-9)
    slice.run(() => holdThread(0.01))
    const failing = slice.later(() => {
      throw new Error('no body')
    })
    const after = slice.later(() => 'sent')
    await expect(failing).rejects.toThrow('no body')
    await expect(after).resolves.toBe('sent')
  })

  test('a read that arrives while work waits is taken between the slices; unsliced, only after all of it', async () => {
    const server = createServer((socket) => socket.end('chunk'))
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    const { port } = server.address() as AddressInfo
    try {
      const jobsDoneAtRead = async (sliceMs: number): Promise<number> => {
        const socket = connect(port, '127.0.0.1')
        await once(socket, 'connect')
        const slice = new TurnSlice(sliceMs)
        let done = 0
        const job = (): void => {
          holdThread(2)
          done++
        }
        // Twenty jobs of 2 ms each come due at once, as a closed loop's round of ends does; the
        // server's bytes are already on their way.
        await new Promise((resolve) => setTimeout(resolve, 20))
        const read = once(socket, 'data').then(() => done)
        const all = Array.from({ length: 20 }, () => slice.submit(job))
        const doneAtRead = await read
        await Promise.all(all)
        socket.destroy()
        return doneAtRead
      }
      expect(await jobsDoneAtRead(0.25)).toBeLessThan(5)
      expect(await jobsDoneAtRead(Infinity)).toBe(20)
    } finally {
      server.close()
    }
  })

  test('a slice that is not a number of ms above 0 is refused', () => {
    expect(() => new TurnSlice(0)).toThrow(/sliceMs: a number of ms above 0 \(Infinity: no slices\), got 0/)
    expect(() => new TurnSlice(Number.NaN)).toThrow(/got NaN/)
    const unsliced = new TurnSlice(Infinity)
    unsliced.run(() => holdThread(2))
    expect(unsliced.open).toBe(true)
  })
})
