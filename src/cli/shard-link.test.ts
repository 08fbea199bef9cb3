import { once } from 'node:events'
import { connect } from 'node:net'
import { describe, expect, test } from 'vitest'
import { clockOffset, ShardCoordinator, ShardMember } from './shard-link.ts'

describe('the shards’ link to their coordinator', () => {
  test('the clock offset is NTP’s, from the ping of least round trip; its uncertainty is half that round trip', () => {
    // The coordinator's clock is 5 ms ahead of the shard's; 1 ms each way, 0.2 ms in the coordinator.
    const fair = { t0: 100, t1: 106, t2: 106.2, t3: 102.2 }
    // A slower ping, 6 ms out and 1 ms back: its offset would be off by 2.5 ms.
    const skewed = { t0: 200, t1: 211, t2: 211.2, t3: 207.2 }
    expect(clockOffset([skewed, fair])).toEqual({ clockOffsetMs: 5, clockOffsetUncertaintyMs: 1 })
    expect(clockOffset([skewed]).clockOffsetMs).toBeCloseTo(7.5, 9)
  })

  test('every shard is held at the barrier, then told one start ahead of now, in its own clock', async () => {
    const coordinator = await ShardCoordinator.listen(2, '127.0.0.1', 0)
    try {
      const members = await Promise.all([0, 1].map((i) => ShardMember.join(i, '127.0.0.1', coordinator.port)))
      const first = members[0]!.barrier()
      let early = false
      void first.then(() => (early = true))
      await new Promise((r) => setTimeout(r, 100))
      expect(early).toBe(false)
      const before = Number(process.hrtime.bigint()) / 1e6
      const starts = await Promise.all([first, members[1]!.barrier()])
      // One machine, one monotonic clock: both starts are the same moment, still ahead.
      expect(Math.abs(starts[0] - starts[1])).toBeLessThan(1)
      expect(starts[0]).toBeGreaterThan(before)
      for (const m of members) expect(Math.abs(m.clock.clockOffsetMs)).toBeLessThan(1)
      // A shard that leaves before its record fails the run, naming it.
      members[1]!.close()
      await expect(coordinator.results()).rejects.toThrow('--shards: shard 1 disconnected before it sent its record')
      members[0]!.close()
    } finally {
      await coordinator.close()
    }
  })

  test('a connection that does not speak the protocol is dropped; the shards are not disturbed', async () => {
    const coordinator = await ShardCoordinator.listen(1, '127.0.0.1', 0)
    try {
      const stranger = connect({ host: '127.0.0.1', port: coordinator.port })
      await once(stranger, 'connect')
      stranger.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n\n')
      await once(stranger, 'close')
      const member = await ShardMember.join(0, '127.0.0.1', coordinator.port)
      expect(await member.barrier()).toBeGreaterThan(0)
      member.close()
      await expect(coordinator.results()).rejects.toThrow('shard 0 disconnected before it sent its record')
    } finally {
      await coordinator.close()
    }
  })

  test('an index already taken, or out of range, is refused at the barrier', async () => {
    const coordinator = await ShardCoordinator.listen(2, '127.0.0.1', 0)
    try {
      const a = await ShardMember.join(0, '127.0.0.1', coordinator.port)
      const b = await ShardMember.join(0, '127.0.0.1', coordinator.port)
      await expect(b.barrier()).rejects.toThrow(/--shard-index: the coordinator refused it: shard index 0 is not one of 0…1 not yet joined/)
      const c = await ShardMember.join(2, '127.0.0.1', coordinator.port)
      await expect(c.barrier()).rejects.toThrow(/shard index 2/)
      a.close()
    } finally {
      await coordinator.close()
    }
  })
})
