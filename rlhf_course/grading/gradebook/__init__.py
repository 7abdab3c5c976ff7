"""The gradebook wing: what trusted grading writes into nbgrader's gradebook (:mod:`gradebook`) and the files
made from it: ``nbgrader export``'s CSV (:mod:`export`), the learning management system's (:mod:`lms_export`),
grading_report.csv (:mod:`report`), the misconceptions named (:mod:`misconception_record`) and the late penalty
(:mod:`late_penalty`)."""
