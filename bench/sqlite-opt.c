// SQLite CPU time at different gcc -O levels (bench/sqlite-opt.sh, issue 33):
// journal-like writes and memory-store inserts and FTS5 searches, in memory
// (no fsync), against the sqlite3.c that libsqlite3-sys bundles.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sqlite3.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void ex(sqlite3*db,const char*s){char*e=0;if(sqlite3_exec(db,s,0,0,&e)){fprintf(stderr,"%s: %s\n",s,e);exit(1);}}
int main(int argc,char**argv){
  int n=argc>1?atoi(argv[1]):200000;
  sqlite3*db; sqlite3_open(":memory:",&db);
  ex(db,"CREATE TABLE journal(run TEXT, seq INTEGER, kind TEXT, payload BLOB, PRIMARY KEY(run,seq))");
  ex(db,"CREATE TABLE entries(id INTEGER PRIMARY KEY, key TEXT, body TEXT)");
  ex(db,"CREATE VIRTUAL TABLE entries_fts USING fts5(key, body, content='entries', content_rowid='id')");
  sqlite3_stmt*ins,*sel,*mem,*fts,*q;
  sqlite3_prepare_v2(db,"INSERT INTO journal VALUES(?1,?2,'op',?3)",-1,&ins,0);
  sqlite3_prepare_v2(db,"SELECT payload FROM journal WHERE run=?1 AND seq=?2",-1,&sel,0);
  sqlite3_prepare_v2(db,"INSERT INTO entries(key,body) VALUES(?1,?2)",-1,&mem,0);
  sqlite3_prepare_v2(db,"INSERT INTO entries_fts(rowid,key,body) VALUES(?1,?2,?3)",-1,&fts,0);
  sqlite3_prepare_v2(db,"SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?1 ORDER BY rank LIMIT 5",-1,&q,0);
  char blob[200]; memset(blob,'x',sizeof blob); char run[32], body[200];
  const char*words[]={"alpha","beta","gamma","delta","agent","flow","tool","model","search","result","memory","store"};
  double t0=now();
  for(int i=0;i<n;i++){ if(i%64==0) ex(db,"BEGIN");
    snprintf(run,sizeof run,"run-%d",i%97);
    sqlite3_bind_text(ins,1,run,-1,SQLITE_TRANSIENT); sqlite3_bind_int(ins,2,i); sqlite3_bind_blob(ins,3,blob,sizeof blob,SQLITE_STATIC);
    sqlite3_step(ins); sqlite3_reset(ins);
    sqlite3_bind_text(sel,1,run,-1,SQLITE_TRANSIENT); sqlite3_bind_int(sel,2,i); sqlite3_step(sel); sqlite3_reset(sel);
    if(i%64==63) ex(db,"COMMIT"); }
  double t1=now();
  ex(db,"BEGIN");
  for(int i=0;i<n/4;i++){ snprintf(body,sizeof body,"%s %s %s %s note %d",words[i%12],words[(i/12)%12],words[(i/7)%12],words[(i/3)%12],i);
    sqlite3_bind_text(mem,1,words[i%12],-1,SQLITE_STATIC); sqlite3_bind_text(mem,2,body,-1,SQLITE_TRANSIENT); sqlite3_step(mem); sqlite3_reset(mem);
    sqlite3_bind_int64(fts,1,sqlite3_last_insert_rowid(db)); sqlite3_bind_text(fts,2,words[i%12],-1,SQLITE_STATIC); sqlite3_bind_text(fts,3,body,-1,SQLITE_TRANSIENT); sqlite3_step(fts); sqlite3_reset(fts);}
  ex(db,"COMMIT");
  double tq=now();
  for(int i=0;i<2000;i++){ sqlite3_bind_text(q,1,words[i%12],-1,SQLITE_STATIC); while(sqlite3_step(q)==SQLITE_ROW); sqlite3_reset(q);}
  double t2=now();
  printf("journal %.3f us/write  memory insert %.3f us  fts query %.3f ms\n",(t1-t0)/n*1e6,(tq-t1)/(n/4)*1e6,(t2-tq)/2000*1e3);
  return 0;}
