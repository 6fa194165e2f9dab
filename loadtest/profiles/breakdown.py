#!/usr/bin/env python3
"""Where the gateway's CPU goes, from folded stacks (inferno-collapse-perf output):
the share of samples whose stack holds each part, by pattern. Used by scripts/profile."""
import collections,re,sys
keys=[('actix HTTP/1 dispatch (incl. our handler)',r'actix_http::h1'),
('our stages (authenticate..answer)',r'gateway::stages|gateway::api'),
('admit: validate+route+enrich+record',r'pipeline::.*Admission|pipeline::.*admit'),
('JSON decode (wire)',r'gateway::wire'),
('schema validation (jsonschema)',r'jsonschema'),
('enrichment',r'gateway::enrichment'),
('record serialisation (serde_json ser)',r'serde_json::ser'),
('produce call (rd_kafka_producev)',r'rd_kafka_producev'),
('delivery reports / poll thread',r'producer_pollin|rd_kafka_poll'),
('librdkafka broker thread',r'^rdk:broker'),
('context switches',r'finish_task_switch|__schedule'),
('futex (thread wake-ups)',r'futex'),
('socket writes',r'sendmsg|sys_write|sendto'),
('socket reads',r'recvfrom|sys_read|tcp_recvmsg'),
('epoll',r'epoll'),
('malloc/free',r'^mi_|malloc|_int_free|cfree'),
('clock reads',r'clock_gettime'),
('metrics (prometheus)',r'prometheus'),
]
for name in sys.argv[1:]:
    tot=0; incl=collections.Counter(); threads=collections.Counter()
    for line in open(name):
        stack,n=line.rstrip().rsplit(' ',1); n=int(n); tot+=n
        frames=stack.split(';'); threads[re.sub(r'\d+$','',frames[0])]+=n
        for k,pat in keys:
            if any(re.search(pat,f) for f in frames): incl[k]+=n
    print(f'## {name}: threads', {t:f'{100*c/tot:.0f}%' for t,c in threads.most_common(5)})
    for k,_ in keys: print(f'| {k} | {100*incl[k]/tot:.1f}% |')
