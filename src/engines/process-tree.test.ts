import { describe, expect, test } from 'vitest'
import { descendants, type ProcessProbe, ProcessTree, startTime } from './process-tree.ts'

/** A process table the test edits: each pid's parent and start time. */
function table(): ProcessProbe & { procs: Map<number, { parent: number; started: string }> } {
  const procs = new Map<number, { parent: number; started: string }>()
  return {
    procs,
    descendants: async (root) => {
      const out: number[] = []
      const queue = [root]
      while (queue.length > 0) {
        const next = queue.shift() as number
        for (const [pid, p] of procs) {
          if (p.parent !== next) continue
          out.push(pid)
          queue.push(pid)
        }
      }
      return out
    },
    startTime: async (pid) => procs.get(pid)?.started ?? null,
  }
}

describe('ProcessTree', () => {
  test('keeps every descendant it has seen, one that outlived its parent and left the tree too', async () => {
    const t = table()
    t.procs.set(11, { parent: 10, started: 'a' })
    t.procs.set(12, { parent: 11, started: 'b' })
    const tree = new ProcessTree(10, t)
    await tree.snapshot()
    expect(tree.seen).toEqual([11, 12])
    // 11 dies; 12 is reparented to init, out of the walk from 10.
    t.procs.delete(11)
    t.procs.set(12, { parent: 1, started: 'b' })
    t.procs.set(13, { parent: 10, started: 'c' })
    await tree.snapshot()
    expect(tree.seen).toEqual([11, 12, 13])
    expect(await tree.members()).toEqual([12, 13])
  })

  test('a pid reused by a later process is not a member', async () => {
    const t = table()
    t.procs.set(21, { parent: 20, started: 'early' })
    const tree = new ProcessTree(20, t)
    await tree.snapshot()
    t.procs.set(21, { parent: 1, started: 'later' })
    expect(await tree.members()).toEqual([])
  })

  test('a launch that never started has an empty tree', async () => {
    const t = table()
    t.procs.set(5, { parent: -1, started: 'x' })
    const tree = new ProcessTree(-1, t)
    await tree.snapshot()
    expect(tree.seen).toEqual([])
    tree.killNow()
  })

  test('on Linux, reads this process as its parent’s descendant, with a start time', async () => {
    if (process.platform !== 'linux') return
    expect(await descendants(process.ppid)).toContain(process.pid)
    expect(await startTime(process.pid)).toMatch(/^\d+$/)
    expect(await startTime(-5)).toBeNull()
  })
})
