import { describe, expect, test } from 'vitest'
import { parseExposition, parseSampleLine, parseSampleValue } from './exposition.ts'

describe('parseSampleValue', () => {
  test.each([
    ['3.0', 3],
    ['0.4211', 0.4211],
    ['1.23457e+06', 1234570],
    ['8.128902e+06', 8128902],
    ['-2', -2],
    ['.5', 0.5],
    ['+Inf', Number.POSITIVE_INFINITY],
    ['Inf', Number.POSITIVE_INFINITY],
    ['-Inf', Number.NEGATIVE_INFINITY],
  ])('%s → %d', (raw, value) => {
    expect(parseSampleValue(raw)).toBe(value)
  })

  test('NaN is a value; garbage is not', () => {
    expect(parseSampleValue('NaN')).toBeNaN()
    for (const raw of ['', 'abc', '1,5', '0x10', '1e', 'nan']) expect(parseSampleValue(raw)).toBeNull()
  })
})

describe('parseSampleLine', () => {
  test('labels with escapes, spaces and a trailing comma', () => {
    expect(
      parseSampleLine(
        'msdos_file_access_time_seconds{path="C:\\\\DIR\\\\FILE.TXT",error="Cannot find file:\\n\\"FILE.TXT\\"",} 1.458255915e9',
      ),
    ).toEqual({
      name: 'msdos_file_access_time_seconds',
      labels: { path: 'C:\\DIR\\FILE.TXT', error: 'Cannot find file:\n"FILE.TXT"' },
      value: 1458255915,
    })
    expect(parseSampleLine('a{ x = "1" , y="2" } 7')).toEqual({ name: 'a', labels: { x: '1', y: '2' }, value: 7 })
  })

  test('a timestamp is read past; an OpenMetrics exemplar is cut off', () => {
    expect(parseSampleLine('http_requests_total{method="post",code="200"} 1027 1395066363000')).toEqual({
      name: 'http_requests_total',
      labels: { method: 'post', code: '200' },
      value: 1027,
    })
    expect(parseSampleLine('foo_bucket{le="0.5"} 3 # {trace_id="abc"} 0.4 1.6e9')).toEqual({
      name: 'foo_bucket',
      labels: { le: '0.5' },
      value: 3,
    })
  })

  test('names with colons (engine namespaces) and no labels', () => {
    expect(parseSampleLine('llamacpp:prompt_seconds_total 12.8456')).toEqual({
      name: 'llamacpp:prompt_seconds_total',
      labels: {},
      value: 12.8456,
    })
  })

  test.each(['{a="1"} 2', 'a{b=1} 2', 'a{b="1" 2', 'a 1 2 3', 'a', 'a{b="1"}'])('%j is not a sample', (line) => {
    expect(parseSampleLine(line)).toBeNull()
  })
})

describe('parseExposition', () => {
  test('a histogram with labels keeps its _sum and _count per label set', () => {
    const text = [
      '# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.',
      '# TYPE vllm:request_prefill_time_seconds histogram',
      'vllm:request_prefill_time_seconds_sum{engine="0",model_name="m"} 1.5',
      'vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0',
      'vllm:request_prefill_time_seconds_count{engine="0",model_name="m"} 3.0',
      'vllm:request_prefill_time_seconds_sum{engine="1",model_name="m"} 2.5',
      'vllm:request_prefill_time_seconds_count{engine="1",model_name="m"} 4.0',
    ].join('\n')
    const parsed = parseExposition(text)
    expect(parsed.types.get('vllm:request_prefill_time_seconds')).toBe('histogram')
    expect(parsed.samples.filter((s) => s.name.endsWith('_sum'))).toEqual([
      { name: 'vllm:request_prefill_time_seconds_sum', labels: { engine: '0', model_name: 'm' }, value: 1.5 },
      { name: 'vllm:request_prefill_time_seconds_sum', labels: { engine: '1', model_name: 'm' }, value: 2.5 },
    ])
    expect(parsed.samples[1]?.labels.le).toBe('+Inf')
  })

  test('an empty HELP, CRLF endings, # EOF and a broken line do not lose the scrape', () => {
    const parsed = parseExposition(
      '# HELP llamacpp:n_tokens_max\r\n# TYPE llamacpp:n_tokens_max counter\r\n' +
        'llamacpp:n_tokens_max 2688\r\nbroken{ 1\r\ng NaN\r\n# EOF\r\n',
    )
    expect(parsed.samples.map((s) => [s.name, s.value])).toEqual([
      ['llamacpp:n_tokens_max', 2688],
      ['g', Number.NaN],
    ])
    expect(parsed.types.get('llamacpp:n_tokens_max')).toBe('counter')
    expect(parsed.invalidLines).toEqual(['broken{ 1'])
    expect(parsed.invalidLineCount).toBe(1)
  })
})
